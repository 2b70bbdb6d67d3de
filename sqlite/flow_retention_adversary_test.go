package sqlite_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/storetest"
)

// Attacks on the promises of flow retention (docs/design/workflows.md,
// "Retention"; readpast.FlowPruner) on SQLite: odd flow shapes, cursors
// and cutoffs. Each test fails when the promise it names is broken.

var (
	aprPruneCost = flag.Bool("advprune.cost", false, "run the flow-retention cost measurements (slow)")
	aprPruneBig  = flag.Bool("advprune.big", false, "run the flow-retention attack on a batch larger than MaxFlowPrune (slow)")
)

// aprEndedBatch opens a batch of members jobs (queue mq) and runs them
// all; the last, on queue lastq, fails for good. The batch is not sealed.
func aprEndedBatch(t *testing.T, s storetest.RetentionStore, members int) (fin *readpast.Job, last int64) {
	t.Helper()
	ctx := context.Background()
	fin, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fq"}})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]readpast.EnqueueParams, members)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "m", Queue: "mq"}
	}
	ps[members-1] = readpast.EnqueueParams{Kind: "m", Queue: "lastq", MaxAttempts: 1}
	for i := 0; i < members; i += 1000 {
		js, err := s.AddToBatch(ctx, fin.ID, ps[i:min(i+1000, members)])
		if err != nil {
			t.Fatal(err)
		}
		last = js[len(js)-1].ID
	}
	for done := 0; done < members-1; {
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{"mq"}, Limit: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("nothing to claim with %d members left", members-1-done)
		}
		cs := make([]readpast.Completion, len(got))
		for i, j := range got {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		done += len(got)
	}
	storetest.RetentionRun(t, s, "lastq", last, true)
	return fin, last
}

// TestAdvPruneCostOfAnUnripeBatch measures a retention pass over an open
// batch whose members have all ended: each call of PruneFlows walks the
// whole batch again, in a write transaction, to delete nothing. Behind
// -advprune.cost; it reports the figures.
func TestAdvPruneCostOfAnUnripeBatch(t *testing.T) {
	if !*aprPruneCost {
		t.Skip("a measurement: run with -advprune.cost")
	}
	for _, members := range []int{1000, 2000, 4000} {
		s := openTemp(t)
		setup := time.Now()
		aprEndedBatch(t, s, members)
		t.Logf("open batch, %d members enqueued and run in %v", members, time.Since(setup))
		start := time.Now()
		n, calls := storetest.RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater(), Failed: storetest.RetentionLater()})
		if n != 0 {
			t.Fatalf("deleted %d jobs of a batch whose finishing job is live", n)
		}
		t.Logf("open batch, %d ended members: one pass = %d calls, %v", members, calls, time.Since(start))
	}
}

// TestAdvPruneBatchLargerThanTheWalk (promise 1: none of a flow is
// deleted while any job of it is live). A batch of MaxFlowPrune+1
// members, all ended, sealed, its finishing job run; then the last
// member, which failed, is retried: it is pending, a job of the batch.
// The walk of the batch stops at MaxFlowPrune jobs, and only those are
// checked before they are deleted. Behind -advprune.big (100,000 jobs).
func TestAdvPruneBatchLargerThanTheWalk(t *testing.T) {
	if !*aprPruneBig {
		t.Skip("100,000 jobs: run with -advprune.big")
	}
	ctx := context.Background()
	s := openTemp(t)
	fin, last := aprEndedBatch(t, s, readpast.MaxFlowPrune+1)
	if _, err := s.SealBatch(ctx, fin.ID); err != nil {
		t.Fatal(err)
	}
	storetest.RetentionRun(t, s, "fq", fin.ID, false)
	if _, err := s.Retry(ctx, last); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, calls := storetest.RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater(), Failed: storetest.RetentionLater(), Cancelled: storetest.RetentionLater()})
	t.Logf("one pass: %d calls, %v, %d deleted", calls, time.Since(start), n)
	if n != 0 || !storetest.RetentionThere(t, s, fin.ID) {
		t.Fatalf("deleted %d jobs of a batch (finishing job %d there=%v) while its member %d is pending", n, fin.ID, storetest.RetentionThere(t, s, fin.ID), last)
	}
}

// TestAdvPruneShapes runs the shape and cursor attacks on SQLite.
func TestAdvPruneShapes(t *testing.T) {
	storetest.RunRetentionShapes(t, func(t *testing.T) storetest.RetentionStore { return openTemp(t) })
}
