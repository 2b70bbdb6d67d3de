package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// The windows of flows (docs/design/workflows.md, "Promises"), each
// replayed with a stall inside the statements.

// flowOf enqueues parents a and b (pending) and a child c after both,
// and claims a and b.
func flowOf(t *testing.T, s *postgres.Store, policy readpast.EdgePolicy) (a, b, c *readpast.Job) {
	t.Helper()
	jobs, err := s.EnqueueFlow(context.Background(), []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}},
		{Ref: "b", Job: readpast.EnqueueParams{Kind: "b"}},
		{Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{Ref: "a", Policy: policy}, {Ref: "b", Policy: policy}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := mustClaim(t, s, "w", 2)
	if len(got) != 2 || got[0].ID != jobs[0].ID || got[1].ID != jobs[1].ID {
		t.Fatalf("claimed %v, want the two parents", got)
	}
	return got[0], got[1], jobs[2]
}

// stateOf returns job id's state.
func stateOf(t *testing.T, s *postgres.Store, id int64) readpast.JobState {
	t.Helper()
	j, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// TestFlowTwoParentsFinishAtOnce: both parents' completions stop inside
// their resolution, after their rows left the live table and before
// they lock their edges, then go on together: the child's counter goes
// down once for each, and the child is released once, claimable once.
func TestFlowTwoParentsFinishAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for round := range 5 {
		a, b, c := flowOf(t, s, readpast.CancelChild)
		st := newStall(t, s, "flow.resolve")
		doneA := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}})) })
		doneB := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: b.ID, Token: b.Token}})) })
		st.waitBlocked()
		if got := stateOf(t, s, c.ID); got != readpast.StateBlocked {
			t.Fatalf("round %d: child is %s while its parents' completions are in flight", round, got)
		}
		st.open()
		within(t, "completion of a", 10*time.Second, doneA)
		within(t, "completion of b", 10*time.Second, doneB)
		got := mustClaim(t, s, "w", 10)
		if len(got) != 1 || got[0].ID != c.ID {
			t.Fatalf("round %d: claimed %v, want the child %d once", round, got, c.ID)
		}
		if errs, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
}

// TestFlowParentCancelledWhileItsCompletionIsInFlight: a parent's
// completion stops inside its resolution (its row gone from the live
// table, its transaction open) while an operator cancels the parent.
// The cancel waits for the completion and then finds the job succeeded;
// the child is released once, never cancelled.
func TestFlowParentCancelledWhileItsCompletionIsInFlight(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a, b, c := flowOf(t, s, readpast.CancelChild)
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: b.ID, Token: b.Token}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	st := newStall(t, s, "flow.resolve")
	done := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}})) })
	st.waitBlocked()
	cancelled := async(func() error { _, err := s.Cancel(ctx, a.ID); return err })
	select {
	case err := <-cancelled:
		t.Fatalf("the cancel returned (%v) while the completion held the parent", err)
	case <-time.After(200 * time.Millisecond):
	}
	st.open()
	within(t, "completion", 10*time.Second, done)
	select {
	case err := <-cancelled:
		if !errors.Is(err, readpast.ErrInvalidState) {
			t.Fatalf("cancel after the completion: %v, want ErrInvalidState", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel never returned")
	}
	if got := stateOf(t, s, c.ID); got != readpast.StatePending {
		t.Fatalf("child is %s, want pending", got)
	}
}

// TestFlowCancelWinsOverALateCompletion: the cancel of a parent stops at
// its end, its transaction open, while the parent's worker completes it:
// the completion waits, then finds its claim ended (stale), and the
// child is cancelled once, naming the parent.
func TestFlowCancelWinsOverALateCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a, _, c := flowOf(t, s, readpast.CancelChild)
	st := newStall(t, s, "cancel.end")
	cancelled := async(func() error { _, err := st.store.Cancel(ctx, a.ID); return err })
	st.waitBlocked()
	completed := async(func() error { return first(s.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}})) })
	st.open()
	within(t, "cancel", 10*time.Second, cancelled)
	select {
	case err := <-completed:
		if !errors.Is(err, readpast.ErrStaleToken) && !errors.Is(err, readpast.ErrNotFound) {
			t.Fatalf("completion after the cancel: %v, want a stale claim", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the completion never returned")
	}
	j, err := s.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != readpast.StateCancelled || len(j.Errors) != 1 {
		t.Fatalf("child is %s with errors %+v, want cancelled once naming its parent", j.State, j.Errors)
	}
}

// TestFlowEdgeToAFinishingParent: a flow naming an existing running job
// as parent stops before storing its edges (its lock on the parent
// taken) while the parent's worker completes it. The completion waits
// for the flow, then releases the new child: never a child stranded
// behind a parent that finished before its edge existed.
func TestFlowEdgeToAFinishingParent(t *testing.T) {
	ctx := context.Background()
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
	completed := async(func() error { return first(s.Complete(ctx, []readpast.Completion{{ID: p.ID, Token: p.Token}})) })
	select {
	case err := <-completed:
		t.Fatalf("the parent completed (%v) while a flow naming it was being stored", err)
	case <-time.After(200 * time.Millisecond):
	}
	// Claims never wait meanwhile.
	claimWithin(t, "claim while a flow holds a parent", 2*time.Second, s, claimP("w2", 5))
	st.open()
	within(t, "flow", 10*time.Second, flowed)
	within(t, "completion", 10*time.Second, completed)
	if got := stateOf(t, s, child[0].ID); got != readpast.StatePending {
		t.Fatalf("child is %s, want pending", got)
	}
}

// TestFlowStaleCompletionReleasesNothing: a parent's lease expires, the
// rescue gives it back and another worker claims it; the first worker's
// late completion is refused and releases nothing; the second's does.
func TestFlowStaleCompletionReleasesNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}},
		{Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{Ref: "a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w1", Limit: 1, Lease: 50 * time.Millisecond})
	if err != nil || len(old) != 1 {
		t.Fatal(err, old)
	}
	time.Sleep(100 * time.Millisecond)
	if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("rescued %d: %v", n, err)
	}
	cur := mustClaim(t, s, "w2", 1)
	if len(cur) != 1 || cur[0].ID != jobs[0].ID {
		t.Fatalf("claimed %v, want the parent again", cur)
	}
	if err := first(s.Complete(ctx, []readpast.Completion{{ID: old[0].ID, Token: old[0].Token}})); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale completion: %v", err)
	}
	if got := stateOf(t, s, jobs[1].ID); got != readpast.StateBlocked {
		t.Fatalf("child is %s after a stale completion", got)
	}
	if err := first(s.Complete(ctx, []readpast.Completion{{ID: cur[0].ID, Token: cur[0].Token}})); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, jobs[1].ID); got != readpast.StatePending {
		t.Fatalf("child is %s after the current completion", got)
	}
}

// TestFlowDeadlockIsRetried replays the one deadlock flows allow: a
// parent's completion holds its group's row and stops before it locks
// its child; a bulk cancel takes that child's row and a running job of
// the same group, then waits for the group's row; the completion goes on
// and waits for the child. PostgreSQL aborts one of the two, the store
// retries it, and both calls succeed.
func TestFlowDeadlockIsRetried(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.SetGroupLimit(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	flow, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "parent", Group: "g"}},
		{Job: readpast.EnqueueParams{Kind: "victim"}, After: []readpast.After{{Ref: "p"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "victim", Group: "g"}}); err != nil {
		t.Fatal(err)
	}
	running := mustClaim(t, s, "w", 5)
	if len(running) != 2 || running[0].ID != flow[0].ID {
		t.Fatalf("claimed %v, want the parent and the grouped victim", running)
	}
	p := running[0]
	before, err := deadlocks(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	st := newStall(t, s, "flow.resolve")
	completed := async(func() error { return first(st.store.Complete(ctx, []readpast.Completion{{ID: p.ID, Token: p.Token}})) })
	st.waitBlocked()
	var n int
	cancelled := async(func() error {
		var err error
		n, err = s.BulkCancel(ctx, readpast.JobFilter{Kind: "victim"})
		return err
	})
	time.Sleep(300 * time.Millisecond) // the bulk cancel waits for the group's row
	st.open()
	within(t, "completion", 20*time.Second, completed)
	within(t, "bulk cancel", 20*time.Second, cancelled)
	if n != 2 {
		t.Fatalf("bulk cancel cancelled %d jobs, want 2", n)
	}
	// The statistics reach pg_stat_database a moment after the abort.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after, err := deadlocks(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no deadlock happened: the window was not replayed")
		}
	}
	if got := stateOf(t, s, flow[1].ID); got != readpast.StateCancelled {
		t.Fatalf("child is %s, want cancelled", got)
	}
	if got := stateOf(t, s, p.ID); got != readpast.StateSucceeded {
		t.Fatalf("parent is %s, want succeeded", got)
	}
}
