package readpast

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// DefaultRescueInterval is how often RunRescuer looks for expired leases.
const DefaultRescueInterval = 250 * time.Millisecond

// rescueBatch bounds one rescue statement so it never holds many locks.
const rescueBatch = 1000

// resolveBatch bounds the edges one ResolveFlows call resolves.
const resolveBatch = 5000

// groupPruneEvery is how many rescue intervals pass between two prunes of
// idle group rows (a minute at DefaultRescueInterval).
const groupPruneEvery = 240

// tidyEvery is how many rescue intervals pass between two calls of a
// Tidier's Tidy (a second at DefaultRescueInterval; Tidy itself decides
// whether anything is due).
const tidyEvery = 4

// groupPruneBatch bounds one prune statement.
const groupPruneBatch = 1000

// tidyTimeout bounds one Tidy call: its vacuums of small tables take
// milliseconds, seconds with a snapshot held open elsewhere.
const tidyTimeout = time.Minute

// RunRescuer ends expired claims on store every interval until ctx is done,
// and, when the store is a GroupPruner, deletes idle group rows at its
// first tick and every 240 ticks after (a minute at DefaultRescueInterval);
// when it is a Tidier, it calls Tidy every 4 ticks; when it is a
// FlowResolver, it resolves what wide flows left at every tick, and at
// once when the store (a FlowBacklogWaker) says a parent left some. Any number of rescuers
// may run at once, in any number of processes: each claim is rescued by
// exactly one of them. A Client runs one; so does `readpast serve`.
//
// Every store call is bounded (a call on a connection that went half-open
// would otherwise wait for it for good, and with it every later rescue),
// and Tidy runs in a goroutine of its own, so a slow vacuum never delays a
// rescue. RunRescuer returns once ctx is done and that goroutine has
// returned.
func RunRescuer(ctx context.Context, store Store, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultRescueInterval
	}
	if tidier, ok := store.(Tidier); ok {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			runTidy(ctx, tidier, tidyEvery*interval, log)
		}()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	pruner, _ := store.(GroupPruner)
	resolver, _ := store.(FlowResolver)
	var backlog <-chan struct{}
	if w, ok := store.(FlowBacklogWaker); ok && resolver != nil {
		backlog = w.FlowBacklog()
	}
	for tick := 0; ; tick++ {
		if pruner != nil && tick%groupPruneEvery == 0 {
			pruneGroups(ctx, pruner, log)
		}
		for {
			callCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
			n, err := store.RescueExpired(callCtx, rescueBatch)
			cancel()
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
		if resolver != nil {
			resolveFlows(ctx, resolver, log)
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				waiting = false
			case <-backlog: // nil without a waker: never ready
				resolveFlows(ctx, resolver, log)
			}
		}
	}
}

// resolveFlows works off what wide flows' parents left to resolve, in
// bounded calls, until nothing is left.
func resolveFlows(ctx context.Context, r FlowResolver, log *slog.Logger) {
	for {
		callCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		n, err := r.ResolveFlows(callCtx, resolveBatch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "resolve flows", slog.Any("error", err))
			}
			return
		}
		if n < resolveBatch {
			return
		}
	}
}

// pruneGroups deletes idle group rows in batches until none is left.
// runTidy calls t.Tidy every interval, the first time at once, until ctx
// is done.
func runTidy(ctx context.Context, t Tidier, interval time.Duration, log *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		callCtx, cancel := context.WithTimeout(ctx, tidyTimeout)
		n, err := t.Tidy(callCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "tidy", slog.Any("error", err))
		} else if n > 0 {
			log.DebugContext(ctx, "vacuumed", slog.Int("tables", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func pruneGroups(ctx context.Context, p GroupPruner, log *slog.Logger) {
	for {
		callCtx, cancel := context.WithTimeout(ctx, storeCallTimeout)
		n, err := p.PruneGroups(callCtx, groupPruneBatch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "prune idle groups", slog.Any("error", err))
			}
			return
		}
		if n < groupPruneBatch {
			return
		}
	}
}

// Retention says how long finished jobs are kept, per final state. A zero
// duration keeps that state's jobs forever.
type Retention struct {
	Succeeded time.Duration
	Failed    time.Duration
	Cancelled time.Duration
}

// DefaultRetentionInterval is how often RunRetention deletes old jobs.
const DefaultRetentionInterval = time.Minute

// pruneBatch bounds one delete so retention never holds many locks.
const pruneBatch = 1000

// PruneOnce deletes every finished job older than r allows, in batches of
// pruneBatch, and returns how many it deleted.
func PruneOnce(ctx context.Context, store Store, r Retention) (int, error) {
	total := 0
	for _, keep := range []struct {
		state JobState
		age   time.Duration
	}{{StateSucceeded, r.Succeeded}, {StateFailed, r.Failed}, {StateCancelled, r.Cancelled}} {
		if keep.age <= 0 {
			continue
		}
		before := time.Now().Add(-keep.age)
		for {
			n, err := store.Prune(ctx, PruneParams{State: keep.state, Before: before, Limit: pruneBatch})
			total += n
			if err != nil {
				return total, fmt.Errorf("prune %s jobs: %w", keep.state, err)
			}
			if n < pruneBatch {
				break
			}
		}
	}
	n, err := pruneFlows(ctx, store, r)
	total += n
	return total, err
}

// pruneFlows deletes the flows r allows, when store keeps flows: one pass
// over the jobs edges name, pruneBatch at a time.
func pruneFlows(ctx context.Context, store Store, r Retention) (int, error) {
	fp, ok := store.(FlowPruner)
	if !ok {
		return 0, nil
	}
	p := FlowPruneParams{Limit: pruneBatch}
	now := time.Now()
	for _, c := range []struct {
		at  *time.Time
		age time.Duration
	}{{&p.Succeeded, r.Succeeded}, {&p.Failed, r.Failed}, {&p.Cancelled, r.Cancelled}} {
		if c.age > 0 {
			*c.at = now.Add(-c.age)
		}
	}
	if p.Succeeded.IsZero() && p.Failed.IsZero() && p.Cancelled.IsZero() {
		return 0, nil
	}
	total := 0
	for {
		n, next, err := fp.PruneFlows(ctx, p)
		total += n
		if err != nil {
			return total, fmt.Errorf("prune flows: %w", err)
		}
		if next == 0 {
			return total, nil
		}
		p.After = next
	}
}

// RunRetention applies r every interval until ctx is done. Several may
// run at once; each deletes different rows or nothing.
func RunRetention(ctx context.Context, store Store, r Retention, interval time.Duration, log *slog.Logger) {
	if r == (Retention{}) {
		return
	}
	if interval <= 0 {
		interval = DefaultRetentionInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := PruneOnce(ctx, store, r)
		if err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "retention", slog.Any("error", err))
		}
		if n > 0 {
			log.InfoContext(ctx, "deleted old finished jobs", slog.Int("jobs", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
