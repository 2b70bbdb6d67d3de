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
		storetest.RetentionEndedBatch(t, s, members)
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
	fin, last := storetest.RetentionEndedBatch(t, s, readpast.MaxFlowPrune+1)
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
