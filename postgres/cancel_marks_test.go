package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestCancelledHeadLeavesAMark: group g's head A waits in queue p, which no
// claimer reads (paused, or served by no worker), and B, g's next job,
// waits in queue o. A cancel of A is stopped after it has taken A's row,
// before it commits; meanwhile B is enqueued and a claim of o holds g, sees
// A (still pending in its snapshot) as g's head, takes nothing, uses B's
// mark up and marks A. After the cancel commits, a claim of o must take B.
// Before: B had no mark in o and was never claimed (the storetest case
// PauseHoldsAGroupsLaterJobs/cancel shows the same without the race).
func TestCancelledHeadLeavesAMark(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	enqueue, claimO := groupG(t, s)
	a := enqueue("p")
	st := newStall(t, s, "cancel.end")
	done := async(func() error { _, err := st.store.Cancel(ctx, a.ID); return err })
	st.waitBlocked()
	b := enqueue("o")
	c := claimO()
	if len(c) != 0 {
		t.Fatalf("the claim beside the held cancel took %v; want nothing (g's head %d is in p)", ids(c), a.ID)
	}
	st.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c = claimO()
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{b.ID}) {
		t.Fatalf("after g's head %d was cancelled, the claim of o took %v; want g's next job [%d]", a.ID, ids(c), b.ID)
	}
}

// groupG returns, for tests of group g across queues p and o on s, a
// function that enqueues a job of g into a queue, and one that claims up
// to 10 jobs of queue o.
func groupG(t *testing.T, s *postgres.Store) (enqueue func(queue string) *readpast.Job, claimO func() []*readpast.Job) {
	ctx := context.Background()
	enqueue = func(queue string) *readpast.Job {
		t.Helper()
		js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: queue, Group: "g"}})
		if err != nil {
			t.Fatal(err)
		}
		return js[0]
	}
	claimO = func() []*readpast.Job {
		t.Helper()
		js, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"o"}, Worker: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	return enqueue, claimO
}
