package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Adversarial tests of the promises of flows (docs/design/workflows.md,
// "Promises"): each one sets up a window the design names, or one it
// does not, and checks the promise at its end.

// wideFlow enqueues a parent in queue q and width children that run after
// it under policy, and returns the parent and the children.
func wideFlow(t *testing.T, s *postgres.Store, q string, width int, policy readpast.EdgePolicy) (*readpast.Job, []*readpast.Job) {
	t.Helper()
	jobs := []readpast.FlowJob{{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: q}}}
	for range width {
		jobs = append(jobs, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "c", Queue: q}, After: []readpast.After{{Ref: "p", Policy: policy}}})
	}
	out, err := s.EnqueueFlow(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	return out[0], out[1:]
}

// claimOne claims exactly job id from queue q (the first due).
func claimOne(t *testing.T, s *postgres.Store, q string, id int64) *readpast.Job {
	t.Helper()
	got, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("claimed %v, want job %d", got, id)
	}
	return got[0]
}

// stranded returns the blocked jobs whose waiting_on differs from their
// unresolved edges, or that have no parent that can still release them
// (a live parent, or a finished one holding them, or a backlog row).
func stranded(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT c.id, c.waiting_on,
		       (SELECT count(*) FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done'),
		       EXISTS (SELECT 1 FROM readpast_edges e
		               WHERE e.child_id = c.id AND e.state <> 'done'
		                 AND (EXISTS (SELECT 1 FROM readpast_jobs p WHERE p.id = e.parent_id)
		                      OR (e.state = 'held' AND EXISTS (SELECT 1 FROM readpast_jobs_history h WHERE h.id = e.parent_id))
		                      OR EXISTS (SELECT 1 FROM readpast_flow_backlog b WHERE b.parent_id = e.parent_id)))
		FROM readpast_jobs c WHERE c.state = 'blocked' ORDER BY c.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var waiting, open int
		var releasable bool
		if err := rows.Scan(&id, &waiting, &open, &releasable); err != nil {
			t.Fatal(err)
		}
		if waiting != open || !releasable {
			out = append(out, fmt.Sprintf("job %d: waiting_on %d, unresolved edges %d, releasable %v", id, waiting, open, releasable))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCounts fails when Stats differs from the jobs actually stored.
func checkCounts(t *testing.T, s *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, st := range stats {
		got[st.Queue+"/"+string(st.State)] = st.Count
	}
	rows, err := s.Pool().Query(ctx, `
		SELECT queue, state, count(*) FROM (
			SELECT queue, state FROM readpast_jobs
			UNION ALL SELECT queue, state FROM readpast_jobs_history) j
		GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	want := map[string]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			t.Fatal(err)
		}
		want[q+"/"+st] = n
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("Stats says %s is %d, the tables hold %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("Stats says %s is %d, the tables hold none", k, n)
		}
	}
}

// TestFlowAdvWideParentDeletedBeforeItsBacklogIsResolved: a parent of 200
// children succeeds; its final statement resolves the first 128 edges and
// leaves the other 72, open, to the resolver. Before the resolver's tick,
// the succeeded parent is deleted (Delete, or a prune whose cutoff has
// passed). Were the parent deleted (holds_no_child once looked only at
// 'held' edges), drop_edges would delete the 72 open edges, the resolver
// find nothing to resolve, and 72 children stay blocked forever, their
// waiting_on 1 with no edge left: stranded. The delete is refused and the
// prune keeps the parent until the resolver is done.
func TestFlowAdvWideParentDeletedBeforeItsBacklogIsResolved(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"delete", "prune"} {
		t.Run(how, func(t *testing.T) {
			s := newStore(t)
			p, children := wideFlow(t, s, "wide", 200, readpast.CancelChild)
			pj := claimOne(t, s, "wide", p.ID)
			if err := first(s.Complete(ctx, []readpast.Completion{{ID: pj.ID, Token: pj.Token}})); err != nil {
				t.Fatal(err)
			}
			switch how {
			case "delete":
				// Refused while its edges wait for the resolver; the
				// delete goes through once they are resolved.
				if err := s.Delete(ctx, p.ID); !errors.Is(err, readpast.ErrInvalidState) {
					t.Fatalf("delete of the parent with a backlog: %v, want ErrInvalidState", err)
				}
			case "prune":
				if _, err := s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(time.Hour), Limit: 100}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.ResolveFlows(ctx, 100000); err != nil {
				t.Fatal(err)
			}
			if how == "delete" {
				if err := s.Delete(ctx, p.ID); err != nil {
					t.Fatalf("delete of the parent once its edges are resolved: %v", err)
				}
			}
			blocked := 0
			for _, c := range children {
				if stateOf(t, s, c.ID) == readpast.StateBlocked {
					blocked++
				}
			}
			if blocked > 0 {
				t.Errorf("%d of %d children of a succeeded parent are still blocked after the resolver ran", blocked, len(children))
			}
			if bad := stranded(t, s); len(bad) > 0 {
				t.Errorf("%d stranded children, first: %s", len(bad), bad[0])
			}
		})
	}
}

// TestFlowAdvWideHeldParentDeletedBeforeItsBacklogIsResolved: as above,
// with hold_child edges and a cancelled parent: the 72 edges the trigger
// left to the resolver are still 'open' (not yet 'held'), so the parent,
// which is to be kept while it holds a blocked child, is deleted, and no
// retry of it can release them any more.
func TestFlowAdvWideHeldParentDeletedBeforeItsBacklogIsResolved(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	p, children := wideFlow(t, s, "wide", 200, readpast.HoldChild)
	// The first 128 children are cancelled by hand: the parent's own
	// statement resolves their edges (as nothing) and leaves the other
	// 72, still open, to the resolver.
	for _, c := range children[:128] {
		if _, err := s.Cancel(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	err := s.Delete(ctx, p.ID)
	if err == nil {
		t.Errorf("a cancelled parent holding 72 blocked children (hold_child edges) was deleted")
	} else if !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatal(err)
	}
	if _, err := s.ResolveFlows(ctx, 100000); err != nil {
		t.Fatal(err)
	}
	if bad := stranded(t, s); len(bad) > 0 {
		t.Errorf("%d stranded children, first: %s", len(bad), bad[0])
	}
}

// TestFlowAdvReleasedChildAheadOfTheClaimPosition: a claim that starts
// from the store's remembered position (claimfrom.go) reads the claim
// order from that position on. A child that its parent's completion
// releases is pending at now with its own priority: ahead of a position
// at a lower priority. Complete (unlike every other write of the store
// that makes jobs pending: release, fail, snooze, retry, rescue, resume,
// ResolveFlows) does not make the next claim a full one, so the next
// claims pass the released child over and take jobs of a lower priority
// instead, until the next full claim (up to claimFullMax, 10 s, later;
// here an hour, set by SetClaimFullEvery to make it deterministic). The
// design says the child "is claimable at once": the trigger's "ahead"
// NOTIFY makes every listening store's next claim a full one (a cancel
// does so at once).
func TestFlowAdvReleasedChildAheadOfTheClaimPosition(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"complete", "cancel run_anyway"} {
		t.Run(how, func(t *testing.T) {
			s := newStore(t)
			postgres.SetClaimFullEvery(s, time.Hour)
			// The store's listener: it wakes its subscribers once its
			// LISTEN is in place.
			wake, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-wake:
			case <-time.After(5 * time.Second):
				t.Fatal("the store's listener never started")
			}
			policy := readpast.CancelChild
			if how != "complete" {
				policy = readpast.RunAnyway
			}
			jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
				{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "pos"}},
				{Job: readpast.EnqueueParams{Kind: "c", Queue: "pos"}, After: []readpast.After{{Ref: "p", Policy: policy}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			var low []readpast.EnqueueParams
			for range 100 { // more than the claims of a second take
				low = append(low, readpast.EnqueueParams{Kind: "low", Queue: "pos", Priority: 5})
			}
			if _, err := s.Enqueue(ctx, low); err != nil {
				t.Fatal(err)
			}
			p := claimOne(t, s, "pos", jobs[0].ID) // a full claim
			// A positioned claim: the position moves to priority 5.
			got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"pos"}, Worker: "w", Limit: 1, Lease: time.Minute})
			if err != nil || len(got) != 1 || got[0].Priority != 5 {
				t.Fatal(err, got)
			}
			if how == "complete" {
				if err := first(s.Complete(ctx, []readpast.Completion{{ID: p.ID, Token: p.Token}})); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.Cancel(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
			if got := stateOf(t, s, jobs[1].ID); got != readpast.StatePending {
				t.Fatalf("child is %s", got)
			}
			// The release reaches the store's claim positions by the
			// "ahead" NOTIFY its listener hears (a completion) or at
			// once (a cancel): within a second, the claims take the
			// child, not a job of a lower priority.
			for deadline := time.Now().Add(time.Second); ; {
				got, err = s.Claim(ctx, readpast.ClaimParams{Queues: []string{"pos"}, Worker: "w", Limit: 1, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 1 && got[0].ID == jobs[1].ID {
					break
				}
				if len(got) != 1 || time.Now().After(deadline) {
					t.Fatalf("the claims after the release took %v, not the released child %d (priority 0), pending and due", got, jobs[1].ID)
				}
				// Not released: that would make the next claim a full one.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestFlowAdvRefusedFlowMarksItsExistingParents: a flow in the caller's
// transaction names a live job and a cancelled one as parents. It is
// refused (ErrInvalidState), and the caller, as callers do with an
// error they handle, commits the rest of its transaction: the live job
// is left marked has_children with no edge (every finish of it fires the
// resolution trigger for nothing), and it stayed locked until the commit.
// "A flow refused stores nothing" is not quite so.
func TestFlowAdvRefusedFlowMarksItsExistingParents(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	live, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "live"}, {Kind: "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, live[1].ID); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.EnqueueFlowTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c"},
		After: []readpast.After{{JobID: live[0].ID}, {JobID: live[1].ID}}}})
	if !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("flow after a cancelled job: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after a refused flow: %v", err)
	}
	var marked bool
	if err := s.Pool().QueryRow(ctx, "SELECT has_children FROM readpast_jobs WHERE id = $1", live[0].ID).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked {
		t.Errorf("job %d is marked has_children by a flow that was refused, and no edge names it", live[0].ID)
	}
}

// TestFlowAdvFlowDeadlocksWithACancelOfAParentListedAfterItsChild: a
// flow's jobs get ids in the order they are listed, so a child listed
// before its parent has the smaller id. A later flow that names both as
// parents (in a caller's transaction) locks them in id order: the child
// first, then the parent. A cancel of the parent holds the parent's row
// and its trigger then wants the child's: a lock cycle that the design's
// lock order ("a child's row is only ever locked after a parent's row")
// says cannot happen, and that is not among the documented deadlocks.
// PostgreSQL aborts one of them; the caller's transaction gets the
// deadlock error.
func TestFlowAdvFlowDeadlocksWithACancelOfAParentListedAfterItsChild(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "c", Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{Ref: "p"}}},
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "p"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, p := jobs[0], jobs[1]
	if c.ID > p.ID {
		t.Fatalf("child %d listed first has a larger id than its parent %d", c.ID, p.ID)
	}
	st := newStall(t, s, "flow.resolve")
	cancelled := async(func() error { _, err := st.store.Cancel(ctx, p.ID); return err })
	st.waitBlocked() // the cancel holds p's row, its edges and child not locked yet
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	flowed := async(func() error {
		_, err := s.EnqueueFlowTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "g"},
			After: []readpast.After{{JobID: c.ID}, {JobID: p.ID}}}})
		return err
	})
	time.Sleep(300 * time.Millisecond) // the flow holds c and waits for p
	st.open()
	var flowErr error
	select {
	case flowErr = <-flowed:
	case <-time.After(15 * time.Second):
		t.Fatal("the flow never returned")
	}
	tx.Rollback(ctx)
	within(t, "cancel", 15*time.Second, cancelled)
	if flowErr != nil && !errors.Is(flowErr, readpast.ErrInvalidState) {
		t.Errorf("a flow naming a child and its parent while the parent is cancelled: %v", flowErr)
	}
}

// TestFlowAdvCancellationCascadeIsNotBounded: each child a parent's final
// statement cancels fires the trigger in turn; were the bound per
// trigger (128 edges each), a root with 128 children of 128 children
// each would cancel 16,512 jobs inside the worker's Fail, holding the
// root's group row meanwhile. The bound is the transaction's
// (readpast_flow_budget): the statement resolves at most about 128
// edges, and the resolver the rest.
func TestFlowAdvCancellationCascadeIsNotBounded(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const width = 128
	root, kids := wideFlow(t, s, "tree", width, readpast.CancelChild)
	var flow []readpast.FlowJob
	for _, k := range kids {
		for range width {
			flow = append(flow, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "g", Queue: "tree"}, After: []readpast.After{{JobID: k.ID}}})
			if len(flow) == readpast.MaxFlowJobs {
				if _, err := s.EnqueueFlow(ctx, flow); err != nil {
					t.Fatal(err)
				}
				flow = flow[:0]
			}
		}
	}
	if len(flow) > 0 {
		if _, err := s.EnqueueFlow(ctx, flow); err != nil {
			t.Fatal(err)
		}
	}
	r := claimOne(t, s, "tree", root.ID)
	began := time.Now()
	if err := first(s.Fail(ctx, []readpast.Failure{{ID: r.ID, Token: r.Token, Message: "x", Discard: true}})); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_jobs_history WHERE state = 'cancelled'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("the root's Fail took %v and cancelled %d jobs in its own statement", took, n)
	if n > 2*width {
		t.Errorf("the root's final statement cancelled %d jobs itself (the design bounds it to its first %d edges)", n, width)
	}
	// The resolver cancels the rest.
	if _, err := s.ResolveFlows(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_jobs_history WHERE state = 'cancelled'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != width+width*width {
		t.Errorf("%d jobs cancelled once the resolver is done, want %d", n, width+width*width)
	}
	checkCounts(t, s)
}

// TestFlowAdvHoldRetryBulkAndCounts walks the hold_child, retry, bulk
// cancel, bulk retry, delete and prune paths one after another, checking
// after each step that Stats matches the tables and that no blocked job
// is stranded.
func TestFlowAdvHoldRetryBulkAndCounts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	check := func(step string) {
		t.Helper()
		checkCounts(t, s)
		if bad := stranded(t, s); len(bad) > 0 {
			t.Errorf("after %s: %d stranded, first: %s", step, len(bad), bad[0])
		}
	}
	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "h"}},
		{Ref: "q", Job: readpast.EnqueueParams{Kind: "q", Queue: "h"}},
		{Ref: "held", Job: readpast.EnqueueParams{Kind: "held", Queue: "h", Group: "g"}, After: []readpast.After{{Ref: "p", Policy: readpast.HoldChild}}},
		{Ref: "both", Job: readpast.EnqueueParams{Kind: "both", Queue: "h"}, After: []readpast.After{{Ref: "p", Policy: readpast.HoldChild}, {Ref: "q"}}},
		{Job: readpast.EnqueueParams{Kind: "grand", Queue: "h"}, After: []readpast.After{{Ref: "held"}, {Ref: "both", Policy: readpast.RunAnyway}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, q, held, both, grand := jobs[0], jobs[1], jobs[2], jobs[3], jobs[4]
	check("enqueue")
	// p fails for good: held and both are held.
	pj := claimOne(t, s, "h", p.ID)
	if err := first(s.Fail(ctx, []readpast.Failure{{ID: pj.ID, Token: pj.Token, Message: "x", Discard: true}})); err != nil {
		t.Fatal(err)
	}
	check("p failed")
	if err := s.Delete(ctx, p.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("delete of a parent holding children: %v", err)
	}
	// both is cancelled by hand meanwhile; its child grand runs anyway
	// after it, but still waits for held.
	if _, err := s.Cancel(ctx, both.ID); err != nil {
		t.Fatal(err)
	}
	check("both cancelled")
	if got := stateOf(t, s, grand.ID); got != readpast.StateBlocked {
		t.Fatalf("grand is %s", got)
	}
	// Bulk cancel of queue h takes q (pending) and blocked held and grand.
	n, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: "h"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bulk cancel counted %d", n)
	check("bulk cancel")
	// Bulk retry of everything failed or cancelled: p comes back with its
	// held edges, the rest pending now.
	if n, err = s.BulkRetry(ctx, readpast.JobFilter{Queue: "h"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("bulk retry counted %d", n)
	check("bulk retry")
	for _, id := range []int64{p.ID, q.ID, held.ID, both.ID, grand.ID} {
		if got := stateOf(t, s, id); got != readpast.StatePending {
			t.Errorf("job %d is %s after the bulk retry", id, got)
		}
	}
	// Everything runs; then prune and delete everything.
	for {
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"h"}, Worker: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, j := range got {
			if err := first(s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("drained")
	for _, id := range []int64{p.ID, q.ID, held.ID, both.ID, grand.ID} {
		if got := stateOf(t, s, id); got != readpast.StateSucceeded {
			t.Errorf("job %d is %s after the drain", id, got)
		}
	}
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	check("pruned")
	var edges int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_edges").Scan(&edges); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, "SELECT (SELECT count(*) FROM readpast_jobs) + (SELECT count(*) FROM readpast_jobs_history)").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if edges != 0 {
		t.Errorf("%d edges left after the prune, %d jobs left", edges, left)
	}
}

// TestFlowAdvHeldChildReleasedByRetriedParent: p fails for good holding
// c; p is retried (Retry) and succeeds: c is released. The same with
// the child's other parent cancelled meanwhile (c is cancelled; p's
// retry and success then change nothing, and p can be deleted).
func TestFlowAdvHeldChildReleasedByRetriedParent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "r"}},
		{Ref: "o", Job: readpast.EnqueueParams{Kind: "o", Queue: "r2"}},
		{Job: readpast.EnqueueParams{Kind: "c", Queue: "r"}, After: []readpast.After{{Ref: "p", Policy: readpast.HoldChild}}},
		{Job: readpast.EnqueueParams{Kind: "d", Queue: "r"}, After: []readpast.After{{Ref: "p", Policy: readpast.HoldChild}, {Ref: "o"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, o, c, d := jobs[0], jobs[1], jobs[2], jobs[3]
	pj := claimOne(t, s, "r", p.ID)
	if err := first(s.Fail(ctx, []readpast.Failure{{ID: pj.ID, Token: pj.Token, Message: "x", Discard: true}})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, d.ID); got != readpast.StateCancelled {
		t.Fatalf("d is %s after its other parent was cancelled", got)
	}
	if _, err := s.Retry(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	pj = claimOne(t, s, "r", p.ID)
	if err := first(s.Complete(ctx, []readpast.Completion{{ID: pj.ID, Token: pj.Token}})); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, c.ID); got != readpast.StatePending {
		t.Fatalf("held child is %s after its parent was retried and succeeded", got)
	}
	if got := stateOf(t, s, d.ID); got != readpast.StateCancelled {
		t.Fatalf("d is %s", got)
	}
	checkCounts(t, s)
	if bad := stranded(t, s); len(bad) > 0 {
		t.Error(bad)
	}
}

// TestFlowAdvGroupedParentHeldByAnOpenFlow: a flow in a caller's open
// transaction names a pending grouped job as parent: its row is locked,
// and a claim passes it over meanwhile, using up the group's ready mark.
// Once the caller commits, the parent must still be claimable (a mark
// left for it), and its completion must release the flow's child.
func TestFlowAdvGroupedParentHeldByAnOpenFlow(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ps, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "p", Queue: "g", Group: "k"}, {Kind: "p2", Queue: "g", Group: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	kids, err := s.EnqueueFlowTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c", Queue: "g"}, After: []readpast.After{{JobID: ps[0].ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []*readpast.Job
	within(t, "claim while a flow holds the group's head", 2*time.Second, async(func() error {
		var err error
		got, err = s.Claim(ctx, readpast.ClaimParams{Queues: []string{"g"}, Worker: "w", Limit: 1, Lease: time.Minute})
		return err
	}))
	t.Logf("claimed while held: %v", got)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range got {
		if err := first(s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for stateOf(t, s, kids[0].ID) == readpast.StateBlocked {
		if time.Now().After(deadline) {
			t.Fatalf("parent %d is %s; the child is still blocked", ps[0].ID, stateOf(t, s, ps[0].ID))
		}
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"g"}, Worker: "w", Limit: 5, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			if err := first(s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newStallIso is newStall with the stalling store's sessions at
// default_transaction_isolation iso (an operator may set it per database
// or role).
func newStallIso(t *testing.T, base *postgres.Store, place, iso string) *stall {
	t.Helper()
	return newStallWith(t, base, place, "", map[string]string{"default_transaction_isolation": iso})
}

// TestFlowAdvStricterIsolation replays two parents finishing at once,
// and a flow naming a parent that finishes meanwhile, with the finishers
// at REPEATABLE READ and SERIALIZABLE: each finisher's snapshot predates
// the other's commit.
func TestFlowAdvStricterIsolation(t *testing.T) {
	ctx := context.Background()
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run(iso+"/two parents", func(t *testing.T) {
			s := newStore(t)
			a, b, c := flowOf(t, s, readpast.CancelChild)
			st := newStallIso(t, s, "flow.resolve", iso)
			doneA := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}})) })
			doneB := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: b.ID, Token: b.Token}})) })
			st.waitBlocked()
			time.Sleep(100 * time.Millisecond)
			st.open()
			within(t, "completion of a", 10*time.Second, doneA)
			within(t, "completion of b", 10*time.Second, doneB)
			if got := stateOf(t, s, c.ID); got != readpast.StatePending {
				t.Fatalf("child is %s", got)
			}
			checkCounts(t, s)
		})
		t.Run(iso+"/flow to a finishing parent", func(t *testing.T) {
			s := newStore(t)
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "p"}}); err != nil {
				t.Fatal(err)
			}
			p := mustClaim(t, s, "w", 1)[0]
			st := newStall(t, s, "flow.edges")
			var child []*readpast.Job
			flowed := async(func() error {
				var err error
				child, err = st.store.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{JobID: p.ID}}}})
				return err
			})
			st.waitBlocked()
			fin := newStallIso(t, s, "nowhere", iso)
			tx, err := fin.store.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			var one int
			if err := tx.QueryRow(ctx, "SELECT 1 FROM readpast_jobs LIMIT 1").Scan(&one); err != nil { // the snapshot
				t.Fatal(err)
			}
			completed := async(func() error { return fin.store.CompleteTx(ctx, tx, readpast.Completion{ID: p.ID, Token: p.Token}) })
			time.Sleep(200 * time.Millisecond)
			st.open()
			within(t, "flow", 10*time.Second, flowed)
			cerr := <-completed
			if cerr == nil {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("CompleteTx at %s: %v", iso, cerr)
			if cerr == nil && stateOf(t, s, child[0].ID) != readpast.StatePending {
				t.Fatalf("parent completed, child is %s", stateOf(t, s, child[0].ID))
			}
			if bad := stranded(t, s); len(bad) > 0 {
				t.Error(bad)
			}
		})
	}
}

// TestFlowAdvFlowToAParentBeingCancelled: a flow names a running job as
// parent while a cancel of that job is stopped at its end (row gone,
// transaction open): the flow waits for the cancel and is refused whole
// (ErrInvalidState), storing nothing. Then a blocked job refuses RunNow,
// CancelPending and Retry, naming blocked.
func TestFlowAdvFlowToAParentBeingCancelled(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "p"}}); err != nil {
		t.Fatal(err)
	}
	p := mustClaim(t, s, "w", 1)[0]
	st := newStall(t, s, "cancel.end")
	cancelled := async(func() error { _, err := st.store.Cancel(ctx, p.ID); return err })
	st.waitBlocked()
	flowed := async(func() error {
		_, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{JobID: p.ID}}}})
		return err
	})
	time.Sleep(200 * time.Millisecond)
	st.open()
	within(t, "cancel", 10*time.Second, cancelled)
	select {
	case err := <-flowed:
		if !errors.Is(err, readpast.ErrInvalidState) {
			t.Fatalf("flow naming a parent cancelled meanwhile: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the flow never returned")
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT (SELECT count(*) FROM readpast_jobs) + (SELECT count(*) FROM readpast_edges)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a refused flow left %d rows", n)
	}
	checkCounts(t, s)

	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}},
		{Job: readpast.EnqueueParams{Kind: "b"}, After: []readpast.After{{Ref: "a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := jobs[1].ID
	if _, err := s.RunNow(ctx, b); !errors.Is(err, readpast.ErrInvalidState) {
		t.Errorf("RunNow of a blocked job: %v", err)
	}
	if _, err := s.CancelPending(ctx, b); !errors.Is(err, readpast.ErrInvalidState) {
		t.Errorf("CancelPending of a blocked job: %v", err)
	}
	if _, err := s.Retry(ctx, b); !errors.Is(err, readpast.ErrInvalidState) {
		t.Errorf("Retry of a blocked job: %v", err)
	}
	if got := stateOf(t, s, b); got != readpast.StateBlocked {
		t.Errorf("b is %s", got)
	}
}
