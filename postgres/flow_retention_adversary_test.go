package postgres_test

import (
	"context"
	"flag"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

// Attacks on the promises of flow retention (docs/design/workflows.md,
// "Retention"; readpast.FlowPruner): windows between a prune's snapshot
// and its locks, concurrent prunes, odd flow shapes, cursors and cutoffs.
// Each test fails when the promise it names is broken.

var aprPruneCost = flag.Bool("advprune.cost", false, "run the flow-retention cost measurements (slow)")

// TestAdvPruneShapes runs the shape and cursor attacks on PostgreSQL.
func TestAdvPruneShapes(t *testing.T) {
	storetest.RunRetentionShapes(t, func(t *testing.T) storetest.RetentionStore { return newStore(t) })
}

// TestAdvPruneRetriedChildInAnotherFlowMeanwhile (promise 3: a finished
// job is never pruned while a job that runs after it, by any edge, is
// live). Job c of a later flow runs after job p (After{JobID}) and failed
// for good; failed jobs are kept forever, p is ripe. The prune of p's
// flow takes its snapshot (c finished), stops before its locks, and an
// operator retries c meanwhile: c is pending again, to run after p and
// read p's result. The prune must not delete p then.
func TestAdvPruneRetriedChildInAnotherFlowMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	p := storetest.RetentionFlow(t, s, storetest.RetentionJob("p", "q"))[0]
	c := storetest.RetentionFlow(t, s, storetest.RetentionJob("c", "q", readpast.After{JobID: p.ID}))[0]
	storetest.RetentionRun(t, s, "q", p.ID, false)
	storetest.RetentionRun(t, s, "q", c.ID, true)

	st := newStall(t, s, "prune.flow")
	var n int
	prune := async(func() error {
		var err error
		n, _, err = st.store.PruneFlows(ctx, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater()})
		return err
	})
	st.waitBlocked()
	if _, err := s.Retry(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	st.open()
	within(t, "prune", 10*time.Second, prune)
	if got := stateOf(t, s, c.ID); got != readpast.StatePending {
		t.Fatalf("the retried child is %s, want pending", got)
	}
	if !storetest.RetentionThere(t, s, p.ID) {
		t.Fatalf("the prune deleted %d job(s), among them parent %d, while its child %d, retried meanwhile, is pending to run after it", n, p.ID, c.ID)
	}
}

// TestAdvPruneDeleteMeanwhile (promise 1): a prune has walked a finished
// flow a -> b -> c when an operator deletes b; the prune deletes none of
// the rest in that statement, and a later pass deletes what is left (the
// delete took b's edges, so a and c go by their own age).
func TestAdvPruneDeleteMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	f := storetest.RetentionFlow(t, s, storetest.RetentionJob("a", "q"), storetest.RetentionJob("b", "q", readpast.After{Ref: "a"}), storetest.RetentionJob("c", "q", readpast.After{Ref: "b"}))
	for _, j := range f {
		storetest.RetentionRun(t, s, "q", j.ID, false)
	}
	st := newStall(t, s, "prune.flow")
	var n int
	prune := async(func() error {
		var err error
		n, _, err = st.store.PruneFlows(ctx, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater()})
		return err
	})
	st.waitBlocked()
	if err := s.Delete(ctx, f[1].ID); err != nil {
		t.Fatal(err)
	}
	st.open()
	within(t, "prune", 10*time.Second, prune)
	if n != 0 {
		t.Errorf("the prune deleted %d jobs of a flow whose job was deleted meanwhile", n)
	}
	storetest.RetentionWant(t, s, "the rest of the flow, after the stalled prune", true, f[0].ID, f[2].ID)
	time.Sleep(2 * time.Millisecond)
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	storetest.RetentionWant(t, s, "the rest of the flow, after a pass", false, f[0].ID, f[2].ID)
	storetest.RetentionCounted(t, s)
}

// TestAdvPruneTwoStoresAtOnce (promises 1, 5, 7): two stores on one
// database (two processes) run PruneOnce at once over many ripe flows and
// batches: together they delete every job exactly once, no error, no
// row left behind, counts exact.
func TestAdvPruneTwoStoresAtOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := pgharness.Open(t, url), pgharness.Open(t, url)
	var all []int64
	for i := range 30 {
		tagged := storetest.RetentionJob("a", "q")
		tagged.Job.Tags = []string{"advtag"}
		f := storetest.RetentionFlow(t, a, tagged, storetest.RetentionJob("b", "q", readpast.After{Ref: "a"}), storetest.RetentionJob("c", "q", readpast.After{Ref: "a"}))
		for _, j := range f {
			all = append(all, j.ID)
		}
		if i%5 == 0 {
			fin, err := a.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			ms, err := a.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m", Queue: "q"}, {Kind: "m", Queue: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.SealBatch(ctx, fin.ID); err != nil {
				t.Fatal(err)
			}
			all = append(all, fin.ID, ms[0].ID, ms[1].ID)
		}
	}
	for left := len(all); left > 0; {
		got, err := a.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{"q"}, Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("nothing to claim with %d jobs left", left)
		}
		for _, j := range got {
			if errs, err := a.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil || errs[0] != nil {
				t.Fatal(err, errs)
			}
			left--
		}
	}
	time.Sleep(2 * time.Millisecond)
	var wg sync.WaitGroup
	var na, nb int
	var ea, eb error
	for _, r := range []struct {
		s *postgres.Store
		n *int
		e *error
	}{{a, &na, &ea}, {b, &nb, &eb}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*r.n, *r.e = readpast.PruneOnce(ctx, r.s, readpast.Retention{Succeeded: time.Millisecond})
		}()
	}
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if na+nb != len(all) {
		t.Errorf("two prunes at once deleted %d + %d jobs, want %d in all", na, nb, len(all))
	}
	storetest.RetentionWant(t, a, "every job after two prunes", false, all...)
	if n, err := pgharness.TagRows(ctx, a); err != nil || n != 0 {
		t.Errorf("tag rows left: %d, %v", n, err)
	}
	if c := storetest.RetentionCounted(t, a); c[readpast.StateSucceeded] != 0 {
		t.Errorf("counts after every job was pruned: %v", c)
	}
}

// TestAdvPruneCostOfAnUnripeBatch measures a retention pass over one
// batch whose members have all ended (ripe) while its finishing job is
// live: the batch is still open, filling as work arrives. Each call of
// PruneFlows (1,000 jobs that edges name) walks, and locks, the whole
// batch again, to delete nothing. Behind -advprune.cost; it reports the
// figures.
func TestAdvPruneCostOfAnUnripeBatch(t *testing.T) {
	if !*aprPruneCost {
		t.Skip("a measurement: run with -advprune.cost")
	}
	ctx := context.Background()
	for _, members := range []int{2000, 4000, 8000, 16000} {
		s := newStore(t)
		storetest.RetentionEndedBatch(t, s, members)
		aprResolveAll(t, s)
		start := time.Now()
		n1, _, err := s.PruneFlows(ctx, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater()})
		if err != nil {
			t.Fatal(err)
		}
		one := time.Since(start)
		n, calls := storetest.RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater()})
		took := time.Since(start)
		if n+n1 != 0 {
			t.Fatalf("deleted %d jobs of a batch whose finishing job is live", n+n1)
		}
		t.Logf("open batch, %d ended members: one call %v; one pass = %d calls, %v", members, one, calls, took-one)
	}
}

// aprResolveAll resolves the edges finished parents left to the
// resolver, as a rescuer would.
func aprResolveAll(t *testing.T, s *postgres.Store) {
	t.Helper()
	for {
		n, err := s.ResolveFlows(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

var aprPruneBig = flag.Bool("advprune.big", false, "run the flow-retention attack on a batch larger than MaxFlowPrune (slow)")

// TestAdvPruneBatchLargerThanTheWalk (promise 1: none of a flow is
// deleted while any job of it is live). A batch of MaxFlowPrune+1
// members, all ended, its finishing job run; then the last member, which
// failed, is retried: it is pending, a job of the batch. The walk of the
// batch stops at MaxFlowPrune jobs, and only those are checked before
// they are deleted. Behind -advprune.big (100,000 jobs).
func TestAdvPruneBatchLargerThanTheWalk(t *testing.T) {
	if !*aprPruneBig {
		t.Skip("100,000 jobs: run with -advprune.big")
	}
	ctx := context.Background()
	s := newStore(t)
	fin, last := storetest.RetentionEndedBatch(t, s, readpast.MaxFlowPrune+1)
	if _, err := s.SealBatch(ctx, fin.ID); err != nil {
		t.Fatal(err)
	}
	aprResolveAll(t, s)
	storetest.RetentionRun(t, s, "fq", fin.ID, false)
	if _, err := s.Retry(ctx, last); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, calls := storetest.RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: storetest.RetentionLater(), Failed: storetest.RetentionLater(), Cancelled: storetest.RetentionLater()})
	t.Logf("one pass: %d calls, %v, %d deleted", calls, time.Since(start), n)
	if got := stateOf(t, s, last); got != readpast.StatePending {
		t.Fatalf("the retried member is %s, want pending", got)
	}
	if n != 0 || !storetest.RetentionThere(t, s, fin.ID) {
		t.Fatalf("deleted %d jobs of a batch (finishing job %d there=%v) while its member %d is pending", n, fin.ID, storetest.RetentionThere(t, s, fin.ID), last)
	}
}
