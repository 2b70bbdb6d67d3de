package httpapi

import (
	"testing"
	"time"
)

// TestArrivalClaimAnswersTheWakeUp: a request that claims on arrival
// because its kept group was woken while no one waited looks at the queues
// after that wake-up, so it settles the group: it waits without a second
// claim. Before, the wake-up's mark stayed on the group and the dispatcher
// gave the same request a turn at once, whose claim found nothing again
// (two empty claims for each wake-up of the store's own on PostgreSQL,
// TestOneClaimPerJobEnqueuedOneAtATime).
func TestArrivalClaimAnswersTheWakeUp(t *testing.T) {
	cs := &countingStore{}
	e := newEnv(t, func(c *Config) {
		cs.Store = c.Store
		c.Store = cs
		c.PollInterval = time.Hour // wake-ups only
	})
	// A group kept after its only waiter left.
	_, cancel := startWaiters(e, 1, func(int) string { return `["q"]` }, "20")
	waitingIn(t, e, "q", 1)
	cancel()
	advUntil(t, "the waiter left", func() bool {
		left := false
		advGroup(e, "q", func(g *waitGroup) { left = g != nil && len(g.queue) == 0 && g.holder == nil && g.claiming == 0 })
		return left
	})
	// A wake-up while no one waits.
	e.server.waiters.markAll()

	before := cs.claims.Load()
	got := claimAsync(e, "q", 8)
	waitingIn(t, e, "q", 1)
	if n := cs.claims.Load() - before; n != 1 {
		t.Fatalf("a request arriving after a wake-up made %d claims before it waited, want 1 (its claim on arrival)", n)
	}
	// It still gets a job enqueued now, by the next wake-up.
	e.enqueue(`{"kind":"k","queue":"q"}`)
	select {
	case js := <-got:
		if len(js) != 1 {
			t.Fatalf("the waiting claim got %d jobs, want 1", len(js))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting claim did not get the job within 20 s")
	}
}
