package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// The windows of batches (docs/design/workflows.md, "Batches"), each
// replayed with a stall inside the statements.

// openBatchOf opens a batch whose finishing job is of kind "fin".
func openBatchOf(t *testing.T, s *postgres.Store) *readpast.Job {
	t.Helper()
	fin, err := s.OpenBatch(context.Background(), readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin"}})
	if err != nil {
		t.Fatal(err)
	}
	return fin
}

// TestBatchSealWaitsForAJoinInFlight: a join stops after taking the
// batch's seal edge, before it makes the finishing job wait for its
// member; the seal waits for it, and then the finishing job waits for the
// member: it is claimed only after the member has ended.
func TestBatchSealWaitsForAJoinInFlight(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	fin := openBatchOf(t, s)
	st := newStall(t, s, "batch.join")
	var joined []*readpast.Job
	join := async(func() error {
		var err error
		joined, err = st.store.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m"}})
		return err
	})
	st.waitBlocked()
	seal := async(func() error { _, err := s.SealBatch(ctx, fin.ID); return err })
	select {
	case err := <-seal:
		t.Fatalf("the seal returned (%v) while a join held the batch", err)
	case <-time.After(200 * time.Millisecond):
	}
	st.open()
	within(t, "join", 10*time.Second, join)
	within(t, "seal", 10*time.Second, seal)
	if got := stateOf(t, s, fin.ID); got != readpast.StateBlocked {
		t.Fatalf("finishing job is %s with its member pending", got)
	}
	got := mustClaim(t, s, "w", 10)
	if len(got) != 1 || got[0].ID != joined[0].ID {
		t.Fatalf("claimed %v, want only the member %d", got, joined[0].ID)
	}
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got := mustClaim(t, s, "w", 10); len(got) != 1 || got[0].ID != fin.ID {
		t.Fatalf("claimed %v after the member ended, want the finishing job %d", got, fin.ID)
	}
}

// TestBatchJoinRefusedWhenTheFinisherIsCancelledMeanwhile: a join stops
// after reading that the finishing job is blocked; an operator cancels
// the finishing job; the join is refused whole, and its members are not
// stored.
func TestBatchJoinRefusedWhenTheFinisherIsCancelledMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	fin := openBatchOf(t, s)
	st := newStall(t, s, "batch.join")
	join := async(func() error {
		_, err := st.store.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m"}, {Kind: "m"}})
		return err
	})
	st.waitBlocked()
	if _, err := s.Cancel(ctx, fin.ID); err != nil {
		t.Fatal(err)
	}
	st.open()
	select {
	case err := <-join:
		if !errors.Is(err, readpast.ErrInvalidState) {
			t.Fatalf("join after the cancel: %v, want ErrInvalidState", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the join did not return")
	}
	list, err := s.List(ctx, readpast.ListParams{Kind: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 0 {
		t.Fatalf("a refused join stored %d members", len(list.Jobs))
	}
}

// TestBatchSealAndLastMemberAtOnce: the last member's completion and the
// seal both stop inside their resolution, before they lock their edges
// into the finishing job, then go on together: its counter goes down
// once for each, and it is released once, claimable once.
func TestBatchSealAndLastMemberAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for round := range 3 {
		fin := openBatchOf(t, s)
		if _, err := s.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m"}}); err != nil {
			t.Fatal(err)
		}
		m := mustClaim(t, s, "w", 10)
		if len(m) != 1 {
			t.Fatalf("round %d: claimed %v, want the member", round, m)
		}
		st := newStall(t, s, "flow.resolve")
		done := async(func() error {
			return first(st.store.Complete(ctx, []readpast.Completion{{ID: m[0].ID, Token: m[0].Token}}))
		})
		seal := async(func() error { _, err := st.store.SealBatch(ctx, fin.ID); return err })
		st.waitBlocked()
		if got := stateOf(t, s, fin.ID); got != readpast.StateBlocked {
			t.Fatalf("round %d: finishing job is %s while the seal and its member's completion are in flight", round, got)
		}
		st.open()
		within(t, "completion", 10*time.Second, done)
		within(t, "seal", 10*time.Second, seal)
		got := mustClaim(t, s, "w", 10)
		if len(got) != 1 || got[0].ID != fin.ID {
			t.Fatalf("round %d: claimed %v, want the finishing job %d once", round, got, fin.ID)
		}
		if errs, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
}
