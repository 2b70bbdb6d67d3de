package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
)

// TestCoalescedNotifyWakesOtherProcesses: Store.Enqueue notifies other
// processes at most once per window; an enqueue inside the window is
// announced by a NOTIFY sent at its end, after it committed. A listener
// on another store that claims on every wake-up (and never polls) finds
// both jobs of a burst: the first by the first enqueue's own NOTIFY, the
// second by the trailing one, which comes no earlier than the window's
// end. Without the trailing NOTIFY the second job is never found.
func TestCoalescedNotifyWakesOtherProcesses(t *testing.T) {
	replay.Windowed(t, func(t *testing.T) {
		ctx := context.Background()
		producer := newStore(t)
		defer producer.Close()
		const window = time.Second
		postgres.SetNotifyEvery(producer, window)

		listener, err := postgres.Open(ctx, producer.Pool().Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		defer listener.Close()
		sub, cancel := context.WithCancel(ctx)
		defer cancel()
		wakes, err := listener.Subscribe(sub)
		if err != nil {
			t.Fatal(err)
		}
		// The first wake-ups come from the listener's own LISTEN starting:
		// one at once, one after its read of the due times it missed (the
		// two may arrive as one). Nothing else wakes it until the enqueues.
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener never started")
		}
		select {
		case <-wakes:
		case <-time.After(500 * time.Millisecond):
		}
		if got := mustClaim(t, listener, "w", 10); len(got) != 0 {
			t.Fatalf("claimed %d jobs before any enqueue", len(got))
		}

		enqueueOne := func() (int64, time.Time) {
			t.Helper()
			jobs, err := producer.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
			if err != nil {
				t.Fatal(err)
			}
			return jobs[0].ID, time.Now()
		}
		// waitFor claims on every wake-up until it has job id, and returns
		// when it had it.
		waitFor := func(id int64) time.Time {
			t.Helper()
			deadline := time.After(10 * time.Second)
			for {
				select {
				case <-wakes:
				case <-deadline:
					t.Fatalf("job %d was never announced to the other store", id)
				}
				for _, j := range mustClaim(t, listener, "w", 10) {
					if j.ID != id {
						t.Fatalf("claimed job %d, want %d", j.ID, id)
					}
					return time.Now()
				}
			}
		}
		start := time.Now()
		first, _ := enqueueOne()
		waitFor(first) // announced by its own statement's NOTIFY
		second, secondAt := enqueueOne()
		if secondAt.Sub(start) >= window {
			t.Skipf("the second enqueue came %v after the first, past the window %v: nothing to coalesce", secondAt.Sub(start), window)
		}
		if d := waitFor(second).Sub(start); d < window {
			t.Errorf("job %d was announced %v after the first, inside the %v window: its enqueue notified itself", second, d, window)
		}
	})
}
