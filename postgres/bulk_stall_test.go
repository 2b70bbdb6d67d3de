package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestBulkCancelNeverStallsClaims: a bulk cancel stopped while it holds a
// batch of 1,000 job rows (its statement stalled at bulk.locked, after its
// row locks) makes no claim wait: a claim meanwhile returns at once with
// jobs past the held batch. Once the cancel goes on, it cancels every job
// of the queue, those claimed meanwhile included, and the completions of
// every cancelled running job are refused as stale.
func TestBulkCancelNeverStallsClaims(t *testing.T) {
	base := newStore(t)
	defer base.Close()
	ctx := context.Background()
	const n = 3000
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: "bq"}
	}
	if _, err := base.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	running, err := base.Claim(ctx, readpast.ClaimParams{Queues: []string{"bq"}, Worker: "w", Limit: 100, Lease: time.Minute})
	if err != nil || len(running) != 100 {
		t.Fatal(len(running), err)
	}
	st := newStall(t, base, "bulk.locked")
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := st.store.BulkCancel(ctx, readpast.JobFilter{Queue: "bq"})
		done <- result{n, err}
	}()
	st.waitBlocked()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	start := time.Now()
	more, err := base.Claim(cctx, readpast.ClaimParams{Queues: []string{"bq"}, Worker: "w2", Limit: 50, Lease: time.Minute})
	took := time.Since(start)
	cancel()
	if err != nil || len(more) != 50 {
		t.Fatalf("claim during the bulk cancel: %d jobs, %v", len(more), err)
	}
	// The bulk cancel is stalled until the test lets it go: a claim that
	// waited on it would run into its 10 s timeout. 5 s is room for a
	// claim of 50 that waits for nothing, on a loaded machine.
	if took > 5*time.Second {
		t.Fatalf("a claim waited %s on the bulk cancel", took)
	}
	for _, j := range more {
		if j.ID <= running[len(running)-1].ID+900 {
			t.Fatalf("claimed job %d, which the stalled batch holds", j.ID)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("bulk cancel finished while stalled: %+v", r)
	default:
	}
	st.open()
	r := <-done
	if r.err != nil || r.n != n {
		t.Fatalf("bulk cancel: %d, %v; want %d", r.n, r.err, n)
	}
	for _, j := range append(running, more...) {
		errs, err := base.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
		if err != nil || !errors.Is(errs[0], readpast.ErrStaleToken) {
			t.Fatalf("complete job %d after the bulk cancel: %v %v", j.ID, errs, err)
		}
		if g, err := base.Get(ctx, j.ID); err != nil || g.State != readpast.StateCancelled {
			t.Fatalf("job %d: %+v %v", j.ID, g, err)
		}
	}
}

// TestBulkCancelComesBackForHeldRows: a row another transaction holds when
// the walk reaches it is passed over, and cancelled when the bulk action
// tries it again after the walk.
func TestBulkCancelComesBackForHeldRows(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	ctx := context.Background()
	js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "hq"}, {Kind: "k", Queue: "hq"}, {Kind: "k", Queue: "hq"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_jobs WHERE id = $1 FOR UPDATE", js[1].ID); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = tx.Commit(ctx)
	}()
	n, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: "hq"})
	if err != nil || n != 3 {
		t.Fatalf("bulk cancel: %d, %v; want 3", n, err)
	}
	if g, err := s.Get(ctx, js[1].ID); err != nil || g.State != readpast.StateCancelled {
		t.Fatalf("the held job: %+v %v", g, err)
	}
}
