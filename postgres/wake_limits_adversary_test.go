package postgres_test

import (
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
)

// TestAdvWakeRaisedLaterKeyWakesItsWaiter: job x (keys A, K) is
// passed over while K is full, and its first key A waits on K's row
// (no mark). PutLimit raises K's concurrency: the announce trigger marks
// A's x due now (its second INSERT, the waiters), which notifies no one,
// and mark_keys notifies only when it marked K's own jobs (K has none
// pending): changeLimits must wake the other processes itself.
func TestAdvWakeRaisedLaterKeyWakesItsWaiter(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		putLimit(t, a, readpast.Limit{Key: "A", Concurrency: 5})
		putLimit(t, a, readpast.Limit{Key: "K", Concurrency: 1})
		ys := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "y", Queue: "other", Keys: []string{"K"}})
		got := aw2pgClaim(t, a, "other", 1)
		if len(got) != 1 || got[0].ID != ys[0].ID {
			t.Fatalf("claim of y: %d jobs", len(got))
		}
		xs := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "x", Queue: "q", Keys: []string{"A", "K"}})
		if got := aw2pgClaim(t, a, "q", 10); len(got) != 0 {
			t.Fatalf("x claimed while K is full: %d jobs", len(got))
		}
		time.Sleep(300 * time.Millisecond) // the enqueue's and claims' wake-ups have gone
		replay.Drain(ch)
		putLimit(t, a, readpast.Limit{Key: "K", Concurrency: 2})
		replay.Delivered(t, w, ch, "q", xs[0].ID, time.Now(), "x, whose later key K a limit change raised")
	})
}
