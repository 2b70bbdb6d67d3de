package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// The windows of flow retention (docs/design/workflows.md, "Retention"),
// replayed with a stall between the prune's walk of a flow (on its
// snapshot) and its locks on the flow's history rows.

// finishedChain stores a flow a -> b and runs it: a succeeds, and b
// succeeds too, or fails for good when failB.
func finishedChain(t *testing.T, s *postgres.Store, failB bool) []*readpast.Job {
	t.Helper()
	ctx := context.Background()
	js, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "k"}},
		{Ref: "b", Job: readpast.EnqueueParams{Kind: "k"}, After: []readpast.After{{Ref: "a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range js {
		got := mustClaim(t, s, "w", 10)
		if len(got) != 1 {
			t.Fatalf("claimed %d jobs of the chain, want one at a time", len(got))
		}
		if i == 1 && failB {
			if errs, err := s.Fail(ctx, []readpast.Failure{{ID: got[0].ID, Token: got[0].Token, Message: "boom", Discard: true}}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
			continue
		}
		if errs, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	return js
}

// pruneAllFlows is PruneFlows with every cutoff an hour ahead.
func pruneAllFlows(ctx context.Context, s *postgres.Store) (int, error) {
	later := time.Now().Add(time.Hour)
	n, _, err := s.PruneFlows(ctx, readpast.FlowPruneParams{Succeeded: later, Failed: later, Cancelled: later})
	return n, err
}

// TestFlowPruneRetryMeanwhile: a prune has walked a finished flow when an
// operator retries one of its jobs; the prune deletes none of the flow
// (not the rest of it, around a job that runs again).
func TestFlowPruneRetryMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	js := finishedChain(t, s, true)
	st := newStall(t, s, "prune.flow")
	var n int
	prune := async(func() error {
		var err error
		n, err = pruneAllFlows(ctx, st.store)
		return err
	})
	st.waitBlocked()
	if _, err := s.Retry(ctx, js[1].ID); err != nil {
		t.Fatal(err)
	}
	st.open()
	within(t, "prune", 10*time.Second, prune)
	if n != 0 {
		t.Fatalf("the prune deleted %d jobs of a flow one of whose jobs was retried meanwhile", n)
	}
	if got := stateOf(t, s, js[0].ID); got != readpast.StateSucceeded {
		t.Fatalf("the retried job's parent is %s, want succeeded (kept)", got)
	}
	if got := stateOf(t, s, js[1].ID); got != readpast.StatePending {
		t.Fatalf("the retried job is %s, want pending", got)
	}
}

// TestFlowPruneTwoAtOnce: two prunes walk one flow; the second deletes it
// while the first waits; the first then deletes nothing and fails not.
func TestFlowPruneTwoAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	js := finishedChain(t, s, false)
	st := newStall(t, s, "prune.flow")
	var first int
	prune := async(func() error {
		var err error
		first, err = pruneAllFlows(ctx, st.store)
		return err
	})
	st.waitBlocked()
	if n, err := pruneAllFlows(ctx, s); err != nil || n != 2 {
		t.Fatalf("the second prune deleted %d, %v; want the flow's two jobs", n, err)
	}
	st.open()
	within(t, "prune", 10*time.Second, prune)
	if first != 0 {
		t.Fatalf("the first prune deleted %d more", first)
	}
	for _, j := range js {
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, readpast.ErrNotFound) {
			t.Fatalf("job %d: %v, want ErrNotFound", j.ID, err)
		}
	}
}
