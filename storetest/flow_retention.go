package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Retention of flows: a flow's rows leave history together
// (docs/design/workflows.md, "Retention"). Prune leaves every job an edge
// names; PruneFlows deletes a flow once all of it may go.

// pruneFlows runs PruneFlows with p until it has looked at every job
// edges name, and returns how many jobs it deleted.
func pruneFlows(t *testing.T, s readpast.Store, p readpast.FlowPruneParams) int {
	t.Helper()
	fp, isFP := s.(readpast.FlowPruner)
	if !isFP {
		t.Fatalf("%T keeps flows but does not prune them (readpast.FlowPruner)", s)
	}
	total := 0
	for calls := 0; ; calls++ {
		n, next, err := fp.PruneFlows(ctxT(t), p)
		if err != nil {
			t.Fatalf("PruneFlows(%+v): %v", p, err)
		}
		total += n
		if next == 0 {
			return total
		}
		if next <= p.After || calls > 10000 {
			t.Fatalf("PruneFlows after %d returned next %d", p.After, next)
		}
		p.After = next
	}
}

// pruneBefore deletes what a retention with every state's cutoff at cut
// deletes: Prune for each final state, then PruneFlows.
func pruneBefore(t *testing.T, s readpast.Store, cut time.Time) int {
	t.Helper()
	n := 0
	for _, st := range []readpast.JobState{readpast.StateSucceeded, readpast.StateFailed, readpast.StateCancelled} {
		n += ok(s.Prune(ctxT(t), readpast.PruneParams{State: st, Before: cut})).must(t)
	}
	return n + pruneFlows(t, s, readpast.FlowPruneParams{Succeeded: cut, Failed: cut, Cancelled: cut})
}

// wantGone checks that every job of jobs was deleted, or that every one
// is still there.
func wantGone(t *testing.T, s readpast.Store, what string, gone bool, jobs ...*readpast.Job) {
	t.Helper()
	for _, j := range jobs {
		_, err := s.Get(ctxT(t), j.ID)
		if missing := errors.Is(err, readpast.ErrNotFound); missing != gone || (err != nil && !missing) {
			t.Fatalf("%s: job %d: Get returned %v; want gone=%v", what, j.ID, err, gone)
		}
	}
}

// runOne claims exactly job j and completes it.
func runOne(t *testing.T, s readpast.Store, j *readpast.Job) *readpast.Job {
	t.Helper()
	got := wantClaim(t, s, fmt.Sprintf("job %d", j.ID), j)
	mustComplete(t, s, got...)
	return get(t, s, j.ID)
}

// testFlowLeavesTogether: a finished job of a flow stays while any job of
// its flow is live or younger than its retention, whatever its own age;
// then the whole flow goes in one call. A job no edge names goes by its
// own age, as ever.
func testFlowLeavesTogether(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	plain := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q"})[0]
	runOne(t, s, plain)
	js := flow(t, fs, fj("a", "q"), fj("b", "q", readpast.After{Ref: "a"}), fj("c", "q", readpast.After{Ref: "b"}))
	runOne(t, s, js[0])
	b := runOne(t, s, js[1])
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 1 {
		t.Fatalf("pruned %d jobs while the flow's last job is pending; want the plain job only", n)
	}
	wantGone(t, s, "the plain job", true, plain)
	wantGone(t, s, "the first two jobs, the third pending", false, js[0], js[1])
	time.Sleep(5 * time.Millisecond)
	c := runOne(t, s, js[2])
	if !b.FinishedAt.Before(*c.FinishedAt) {
		t.Fatalf("b finished at %v, c at %v", b.FinishedAt, c.FinishedAt)
	}
	// a and b are past the cutoff, c is not: none goes.
	if n := pruneBefore(t, s, *c.FinishedAt); n != 0 {
		t.Fatalf("pruned %d jobs with the flow's last job younger than the cutoff", n)
	}
	wantGone(t, s, "the flow, its last job young", false, js...)
	if n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond}); err != nil || n != 3 {
		t.Fatalf("PruneOnce deleted %d, %v; want the three jobs of the flow", n, err)
	}
	wantGone(t, s, "the flow", true, js...)
}

// testFlowRetentionPerState: each job of a flow must be past the
// retention of its own state; a state kept forever keeps its flows.
func testFlowRetentionPerState(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	js := flow(t, fs, fj("u", "q"), fj("v", "q", readpast.After{Ref: "u"}))
	runOne(t, s, js[0])
	got := wantClaim(t, s, "v", js[1])
	if err := failOne(ctx, s, readpast.Failure{ID: got[0].ID, Token: got[0].Token, Message: "boom", Discard: true}); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, js[1].ID, readpast.StateFailed)
	later := time.Now().Add(time.Hour)
	if n := pruneFlows(t, s, readpast.FlowPruneParams{Succeeded: later}); n != 0 {
		t.Fatalf("pruned %d jobs of a flow with a failed job, failed jobs kept", n)
	}
	if n := pruneFlows(t, s, readpast.FlowPruneParams{Succeeded: later, Failed: time.Now().Add(-time.Hour)}); n != 0 {
		t.Fatalf("pruned %d jobs of a flow whose failed job is within its retention", n)
	}
	if n := pruneFlows(t, s, readpast.FlowPruneParams{Succeeded: later, Failed: later}); n != 2 {
		t.Fatalf("pruned %d jobs, want the flow's two", n)
	}
	wantGone(t, s, "the flow", true, js...)
}

// testFlowEarlierParentGoesAlone: an edge to a job stored earlier joins
// no flows (else a chain of flows, each after the last, would never
// leave): the earlier job stays while the job after it is live, then
// goes by its own age.
func testFlowEarlierParentGoesAlone(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	x := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q"})[0]
	y := flow(t, fs, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "k", Queue: "q"}, After: []readpast.After{{JobID: x.ID}}})[0]
	runOne(t, s, x)
	got := wantClaim(t, s, "the job after the earlier one", y)
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("pruned %d jobs while the job after the earlier one runs", n)
	}
	time.Sleep(5 * time.Millisecond)
	mustComplete(t, s, got...)
	yf := get(t, s, y.ID)
	if n := pruneBefore(t, s, *yf.FinishedAt); n != 1 {
		t.Fatalf("pruned %d jobs; want the earlier job alone, by its own age", n)
	}
	wantGone(t, s, "the earlier job", true, x)
	wantGone(t, s, "the job after it, younger than the cutoff", false, y)
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 1 {
		t.Fatalf("pruned %d jobs; want the job after the earlier one", n)
	}
}

// testBatchLeavesTogether: a batch's members stay while its finishing job
// is live or young, and leave with it.
func testBatchLeavesTogether(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	fin := openBatch(t, bs, "q", false)
	members := ok(bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q"), member("q"), member("q")})).must(t)
	ok(bs.SealBatch(ctx, fin.ID)).must(t)
	mustComplete(t, s, wantClaim(t, s, "the members", members...)...)
	got := wantClaim(t, s, "the finishing job", fin)
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("pruned %d jobs while the finishing job runs", n)
	}
	time.Sleep(5 * time.Millisecond)
	mustComplete(t, s, got...)
	ff := get(t, s, fin.ID)
	if n := pruneBefore(t, s, *ff.FinishedAt); n != 0 {
		t.Fatalf("pruned %d jobs with the finishing job younger than the cutoff; want the batch kept whole", n)
	}
	wantGone(t, s, "the batch", false, append(members, fin)...)
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 4 {
		t.Fatalf("pruned %d jobs; want the batch's four", n)
	}
	wantGone(t, s, "the batch", true, append(members, fin)...)
}

// testFlowPruneInSteps: PruneFlows looks at Limit jobs a call and says
// where to go on; every flow goes in the end, each once.
func testFlowPruneInSteps(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	var all []*readpast.Job
	for range 12 {
		js := flow(t, fs, fj("p", "q"), fj("c", "q", readpast.After{Ref: "p"}))
		runOne(t, s, js[0])
		runOne(t, s, js[1])
		all = append(all, js...)
	}
	later := time.Now().Add(time.Hour)
	fp := s.(readpast.FlowPruner)
	n, next, err := fp.PruneFlows(ctxT(t), readpast.FlowPruneParams{Succeeded: later, Limit: 3})
	if err != nil || next == 0 || n < 2 {
		t.Fatalf("first call of 3: deleted %d, next %d, %v; want a flow deleted and a place to go on", n, next, err)
	}
	if rest := pruneFlows(t, s, readpast.FlowPruneParams{Succeeded: later, Limit: 3, After: next}); n+rest != len(all) {
		t.Fatalf("deleted %d+%d jobs, want %d", n, rest, len(all))
	}
	wantGone(t, s, "every flow", true, all...)
	if _, _, err := fp.PruneFlows(ctxT(t), readpast.FlowPruneParams{Limit: -1}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("PruneFlows with limit -1: %v, want ErrInvalid", err)
	}
}
