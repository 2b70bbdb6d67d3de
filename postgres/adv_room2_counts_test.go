package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// A claim stopped at claim.more_keys (holding first key a, its snapshot
// showing a count of later key b) while Tidy folds b's count; the claim
// then locks b: it must not subtract the count again.
func TestAdvRoom2MoreKeyFoldedBeforeLock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "a", Concurrency: 5})
	run := keyWithRunning(t, s, "b", 2, 2, 2) // b full
	ubComplete(t, s, run[0])                  // b full: slot on the row (running 1)
	more := ubClaimAll(t, s, "w1", 1, "qb")
	if len(more) != 0 {
		t.Fatalf("claimed %d of b, none pending", len(more))
	}
	keyJobs(t, s, "b", "qb", 1)
	one := ubClaimAll(t, s, "w1", 1, "qb") // b: 2 of 2
	if len(one) != 1 {
		t.Fatalf("claimed %d", len(one))
	}
	// b full now; raise it so b has room, then complete one: counted aside.
	putLimit(t, s, readpast.Limit{Key: "b", Concurrency: 3})
	ubComplete(t, s, one[0])
	if r := ubRowOf(t, s, "b"); r.running != 2 || r.counts != 1 {
		t.Fatalf("b: running %d counts %d; want 2, 1", r.running, r.counts)
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qa", Keys: []string{"a", "b"}},
		{Kind: "k", Queue: "qa", Keys: []string{"a", "b"}},
		{Kind: "k", Queue: "qa", Keys: []string{"a", "b"}},
	}); err != nil {
		t.Fatal(err)
	}
	st := newStall(t, s, "claim.more_keys")
	var got []*readpast.Job
	claimed := async(func() (err error) {
		got, err = st.store.Claim(ctx, claimQ("w2", 5, "qa"))
		return err
	})
	st.waitBlocked()
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ubRowOf(t, s, "b"); r.running != 1 || r.counts != 0 {
		t.Fatalf("b after Tidy: running %d counts %d; want 1, 0", r.running, r.counts)
	}
	st.open()
	within(t, "the claim", withinAtLeast, claimed)
	if len(got) != 2 {
		t.Errorf("claim took %d jobs of [a b] (b: 1 of 3 running), want 2", len(got))
	}
	checkGroups(t, s)
}

// Bulk cancel of running jobs of a key with room beside an open
// CompleteTx of the same key (FOR KEY SHARE) and a limit change waiting.
func TestAdvRoom2BulkCancelBesideOpenCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "a", Concurrency: 4})
	putLimit(t, s, readpast.Limit{Key: "b", Concurrency: 2})
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "keep", Queue: "qa", Keys: []string{"a", "b"}},
		{Kind: "kill", Queue: "qa", Keys: []string{"b", "a"}},
		{Kind: "kill", Queue: "qa", Keys: []string{"a"}},
	}); err != nil {
		t.Fatal(err)
	}
	run := ubClaimAll(t, s, "w", 3, "qa")
	if len(run) != 3 {
		t.Fatalf("claimed %d", len(run))
	}
	var keep *readpast.Job
	for _, j := range run {
		if j.Kind == "keep" {
			keep = j
		}
	}
	before := adv2Deadlocks(t, s.Pool())
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: keep.ID, Token: keep.Token}); err != nil {
		t.Fatal(err) // a roomy: KEY SHARE; b full: NO KEY UPDATE
	}
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "a", Concurrency: 2})
		return err
	})
	ubWaitRowWaiters(t, s, 1)
	cancel := async(func() error {
		n, err := s.BulkCancel(ctx, readpast.JobFilter{Kind: "kill"})
		if err == nil && n != 2 {
			t.Errorf("BulkCancel = %d, want 2", n)
		}
		return err
	})
	time.Sleep(300 * time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "BulkCancel", withinAtLeast, cancel)
	within(t, "PutLimit", withinAtLeast, put)
	time.Sleep(1200 * time.Millisecond)
	if d := adv2Deadlocks(t, s.Pool()) - before; d != 0 {
		t.Errorf("%d deadlocks detected", d)
	}
	checkGroups(t, s)
	for _, k := range []string{"a", "b"} {
		r := ubRowOf(t, s, k)
		if r.running-r.counts != 0 {
			t.Errorf("%s: running %d counts %d, nothing running", k, r.running, r.counts)
		}
	}
}
