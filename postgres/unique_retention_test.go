package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// finishKeyed enqueues a job with key and period, claims it and completes
// it, and returns it.
func finishKeyed(t *testing.T, s *postgres.Store, key string, period time.Duration) *readpast.Job {
	t.Helper()
	ctx := context.Background()
	js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "uq", UniqueKey: key, UniqueFor: period}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"uq"}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(run) != 1 {
		t.Fatalf("claim: %v %v", ids(run), err)
	}
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: run[0].ID, Token: run[0].Token}}); err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", errs, err)
	}
	return js[0]
}

// duplicateOf enqueues key again and fails unless the answer is holder.
func duplicateOf(t *testing.T, s *postgres.Store, key string, period time.Duration, holder int64, what string) {
	t.Helper()
	js, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k", Queue: "uq", UniqueKey: key, UniqueFor: period}})
	if err != nil {
		t.Fatal(err)
	}
	if !js[0].Duplicate || js[0].ID != holder {
		t.Errorf("%s: enqueueing key %q again within its period made job %d (duplicate %v); want the holder %d",
			what, key, js[0].ID, js[0].Duplicate, holder)
	}
}

// TestUniquePeriodUnderRetention: retention with every setting
// (Before far in the future, every final state) runs while the key's
// period has not ended; the key must hold.
func TestUniquePeriodUnderRetention(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	h := finishKeyed(t, s, "k1", time.Hour)
	for _, st := range []readpast.JobState{readpast.StateSucceeded, readpast.StateFailed, readpast.StateCancelled} {
		if _, err := s.Prune(ctx, readpast.PruneParams{State: st, Before: time.Now().Add(100 * 365 * 24 * time.Hour), Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	duplicateOf(t, s, "k1", time.Hour, h.ID, "after Prune")
}
