package sqlite

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestPauseWindows replays, on SQLite, the two windows in which a claim
// and a pause of its queue overlap. A claim reads the queue's pause inside
// its write transaction, and writes are serialized, so:
//   - paused between the claim's read-only probe and its write transaction
//     (the pause runs from inside the claim's first clock read), the claim
//     takes nothing;
//   - paused while the claim's write transaction is open (from its clock
//     read inside it), PauseQueue does not return until the claim has
//     committed: the claim took the jobs before the pause.
func TestPauseWindows(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) *Store {
		s, err := Open(ctx, filepath.Join(t.TempDir(), "pause.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "p"}, {Kind: "k", Queue: "p"}}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	claimP := func(t *testing.T, s *Store) []*readpast.Job {
		js, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"p"}, Worker: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}

	t.Run("before the write transaction", func(t *testing.T) {
		s := setup(t)
		var calls atomic.Int32
		s.now = func() time.Time {
			if calls.Add(1) == 1 { // the probe's clock read
				if err := s.PauseQueue(ctx, "p"); err != nil {
					t.Error(err)
				}
			}
			return time.Now()
		}
		if js := claimP(t, s); len(js) != 0 {
			t.Fatalf("a claim that began before PauseQueue returned took %d jobs of the paused queue after it returned", len(js))
		}
	})

	t.Run("inside the write transaction", func(t *testing.T) {
		s := setup(t)
		var calls atomic.Int32
		paused := make(chan error, 1)
		s.now = func() time.Time {
			if calls.Add(1) == 2 { // the clock read inside the claim's transaction
				go func() { paused <- s.PauseQueue(ctx, "p") }()
				select {
				case err := <-paused:
					t.Errorf("PauseQueue returned (%v) while a claim of its queue was in its transaction", err)
				case <-time.After(200 * time.Millisecond):
				}
			}
			return time.Now()
		}
		if js := claimP(t, s); len(js) != 2 {
			t.Errorf("the claim in flight took %d jobs; want both", len(js))
		}
		select {
		case err := <-paused:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("PauseQueue did not return after the claim committed")
		}
		if js := claimP(t, s); len(js) != 0 {
			t.Errorf("a claim after the pause took %d jobs", len(js))
		}
	})
}
