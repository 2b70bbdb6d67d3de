package readpast_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestRateLimitedKindKeepsItsRate: workers that poll only every 30 s run
// a rate-limited key's backlog at its rate, woken when each start comes
// due (a claim that leaves a key out of tokens announces its next start),
// and never faster.
func TestRateLimitedKindKeepsItsRate(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		ctx := context.Background()
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "api", Rate: 10, Burst: 2}); err != nil {
			t.Fatal(err)
		}
		var (
			mu     sync.Mutex
			starts []time.Time
		)
		w := readpast.NewWorkers()
		w.Handle("call", func(ctx context.Context, job *readpast.Job) (any, error) {
			mu.Lock()
			starts = append(starts, *job.StartedAt)
			mu.Unlock()
			return nil, nil
		}, nil)
		const n = 12
		ps := make([]readpast.EnqueueParams, n)
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "call", Group: "api"}
		}
		if _, err := s.Enqueue(ctx, ps); err != nil {
			t.Fatal(err)
		}
		startClient(t, s, readpast.Config{Workers: w, PollInterval: 30 * time.Second})
		// 2 at once, then one every 100 ms: about 1 s for 12; the poll
		// alone would take minutes.
		waitFor(t, 15*time.Second, "the backlog to run at its rate", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(starts) == n
		})
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(starts, time.Time.Compare)
		for i := range starts {
			for j := i; j < len(starts); j++ {
				// At most Window/Interval + Burst starts in any window.
				if d := starts[j].Sub(starts[i]); d >= 0 && j-i+1 > int(d/(100*time.Millisecond))+2 {
					t.Fatalf("%d starts within %s (rate 10/s, burst 2): %v", j-i+1, d, starts)
				}
			}
		}
	})
}
