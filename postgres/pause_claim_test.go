package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestPauseWaitsForClaimsInFlight replays the window between a claim's
// snapshot and its locks: a claim of queue p is stopped after its
// statement has read p's pause state (claim.queues), and PauseQueue(p) is
// called meanwhile. The pause must not return while the claim can still
// take p's jobs: it waits until the claim has ended. A claim that starts
// while the pause waits leaves p out and takes another queue's jobs
// without waiting, and after the pause no claim takes p's jobs. Before,
// PauseQueue returned at once and the stopped claim then took both of p's
// jobs.
func TestPauseWaitsForClaimsInFlight(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, q := range []string{"p", "p", "o"} {
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: q}}); err != nil {
			t.Fatal(err)
		}
	}
	st := newStall(t, s, "claim.queues")
	var stopped []*readpast.Job
	claimed := async(func() error {
		var err error
		stopped, err = st.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"p"}, Worker: "stopped", Limit: 10, Lease: time.Minute})
		return err
	})
	st.waitBlocked()

	paused := make(chan time.Time, 1)
	pauseErr := async(func() error {
		err := s.PauseQueue(ctx, "p")
		paused <- time.Now()
		return err
	})
	waitPauseWaiting(t, s)
	// While the pause waits, a claim of p and o takes o's job at once and
	// none of p's.
	got := claimWithin(t, "a claim beside the waiting pause", 5*time.Second, s,
		readpast.ClaimParams{Queues: []string{"p", "o"}, Worker: "beside", Limit: 10, Lease: time.Minute})
	for _, j := range got {
		if j.Queue != "o" {
			t.Errorf("a claim beside the waiting pause took job %d of queue %s", j.ID, j.Queue)
		}
	}
	if len(got) != 1 {
		t.Errorf("a claim beside the waiting pause took %v; want o's one job", ids(got))
	}
	select {
	case at := <-paused:
		st.open()
		<-claimed
		if len(stopped) > 0 {
			t.Fatalf("PauseQueue returned at %v while a claim of p was in flight; the claim then took %v of the paused queue",
				at.Format(time.StampMilli), ids(stopped))
		}
		t.Fatal("PauseQueue returned while a claim of p was in flight")
	case <-time.After(300 * time.Millisecond):
	}
	st.open()
	within(t, "the claim in flight", 5*time.Second, claimed)
	within(t, "PauseQueue once the claim in flight ended", 5*time.Second, pauseErr)
	if len(stopped) != 2 {
		t.Errorf("the claim that began before the pause took %v; want p's two jobs", ids(stopped))
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "p"}}); err != nil {
		t.Fatal(err)
	}
	if got := claimWithin(t, "a claim after the pause", 5*time.Second, s,
		readpast.ClaimParams{Queues: []string{"p"}, Worker: "after", Limit: 10, Lease: time.Minute}); len(got) != 0 {
		t.Errorf("a claim after the pause took %v of the paused queue", ids(got))
	}
}

// waitPauseWaiting returns once a PauseQueue waits for a queue's pause key
// (sql/pause_queue.sql), or after 3 s; on code without
// pause keys it returns after that long, so that the test
// goes on to show what such code does.
func waitPauseWaiting(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid = 1919181685 AND objsubid = 2`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
