package readpast

import (
	"context"
	"log/slog"
	"time"
)

// DefaultRescueInterval is how often RunRescuer looks for expired leases.
const DefaultRescueInterval = 250 * time.Millisecond

// rescueBatch bounds one rescue statement so it never holds many locks.
const rescueBatch = 1000

// RunRescuer ends expired claims on store every interval until ctx is done.
// Any number of rescuers may run at once, in any number of processes: each
// claim is rescued by exactly one of them. A Client runs one; so does
// `readpast serve`.
func RunRescuer(ctx context.Context, store Store, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultRescueInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			n, err := store.RescueExpired(ctx, rescueBatch)
			if err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "rescue expired leases", slog.Any("error", err))
				}
				break
			}
			if n > 0 {
				log.InfoContext(ctx, "rescued expired leases", slog.Int("jobs", n))
			}
			if n < rescueBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
