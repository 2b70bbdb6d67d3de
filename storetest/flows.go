package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Flows: jobs that run after other jobs (docs/design/workflows.md). Each
// test skips on a store that keeps no dependencies (not a
// readpast.FlowStore); both stores are.

// flowStore makes a store for a flow test.
func flowStore(t *testing.T, h Harness) (readpast.Store, readpast.FlowStore) {
	t.Helper()
	s := newStore(t, h)
	fs, ok := s.(readpast.FlowStore)
	if !ok {
		t.Skipf("%T does not implement readpast.FlowStore", s)
	}
	return s, fs
}

// fj is a job of kind "k" in queue with ref and edges.
func fj(ref, queue string, after ...readpast.After) readpast.FlowJob {
	return readpast.FlowJob{Ref: ref, Job: readpast.EnqueueParams{Kind: "k", Queue: queue}, After: after}
}

// flow enqueues a flow that must be accepted, and checks the answer: the
// jobs in order, ids increasing, blocked exactly when they have edges.
func flow(t *testing.T, fs readpast.FlowStore, jobs ...readpast.FlowJob) []*readpast.Job {
	t.Helper()
	out := ok(fs.EnqueueFlow(ctxT(t), jobs)).must(t)
	if len(out) != len(jobs) {
		t.Fatalf("EnqueueFlow of %d jobs returned %d", len(jobs), len(out))
	}
	for i, j := range out {
		want := readpast.StatePending
		if len(jobs[i].After) > 0 {
			want = readpast.StateBlocked
		}
		if j.State != want || j.Kind != jobs[i].Job.Kind || (i > 0 && j.ID <= out[i-1].ID) {
			t.Fatalf("EnqueueFlow returned job %d as %+v; want %s, kind %q, ids increasing", i, j, want, jobs[i].Job.Kind)
		}
	}
	return out
}

// claimAll claims everything claimable (up to 100) in every queue with
// jobs, under a minute's lease.
func claimAll(t *testing.T, s readpast.Store) []*readpast.Job {
	t.Helper()
	return claim(t, s, 100, time.Minute, queueList(t, s)...)
}

// queueList names every queue with jobs.
func queueList(t *testing.T, s readpast.Store) []string {
	t.Helper()
	var names []string
	for _, q := range ok(s.Queues(ctxT(t))).must(t) {
		names = append(names, q.Name)
	}
	return names
}

// wantClaim claims everything claimable and wants exactly the jobs want.
func wantClaim(t *testing.T, s readpast.Store, what string, want ...*readpast.Job) []*readpast.Job {
	t.Helper()
	got := claimAll(t, s)
	g, w := ids(got), ids(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: claimed %v, want %v", what, g, w)
	}
	return got
}

func mustComplete(t *testing.T, s readpast.Store, jobs ...*readpast.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := completeOne(ctxT(t), s, j, ""); err != nil {
			t.Fatalf("complete job %d: %v", j.ID, err)
		}
	}
}

// stateCounts sums Stats over queues, leaving out zeros.
func stateCounts(t *testing.T, s readpast.Store) map[readpast.JobState]int64 {
	t.Helper()
	out := map[readpast.JobState]int64{}
	for _, x := range ok(s.Stats(ctxT(t))).must(t) {
		if x.Count != 0 {
			out[x.State] += x.Count
		}
	}
	return out
}

func wantCounts(t *testing.T, s readpast.Store, what string, want map[readpast.JobState]int64) {
	t.Helper()
	if got := stateCounts(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: counts %v, want %v", what, got, want)
	}
}

// wantCancelledBy checks that job id was cancelled by its parent's end:
// no attempt counted, an error naming the parent.
func wantCancelledBy(t *testing.T, s readpast.Store, id, parent int64) {
	t.Helper()
	j := wantState(t, s, id, readpast.StateCancelled)
	name := fmt.Sprintf("parent job %d", parent)
	if j.Attempt != 0 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Message, name) || j.FinishedAt == nil {
		t.Fatalf("job %d cancelled by its parent: %+v; want attempt 0 and one error naming %q", id, j, name)
	}
}

// testFlowRunsInOrder: a -> b, and c after a and b: a claim takes only
// what is released, and c only once both its parents completed.
func testFlowRunsInOrder(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	runAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	c := fj("c", "q", readpast.After{Ref: "a"}, readpast.After{Ref: "b"})
	c.Job.RunAt = runAt
	js := flow(t, fs, fj("a", "q"), fj("b", "q", readpast.After{Ref: "a"}), c)
	a, b := js[0], js[1]
	wantCounts(t, s, "after EnqueueFlow", map[readpast.JobState]int64{readpast.StateBlocked: 2, readpast.StatePending: 1})
	wantState(t, s, b.ID, readpast.StateBlocked)
	got := wantClaim(t, s, "a flow's first claim", a)
	wantClaim(t, s, "while a runs", nil...)
	before := time.Now().Add(-time.Second)
	mustComplete(t, s, got...)
	got = wantClaim(t, s, "after a completed", b)
	wantState(t, s, js[2].ID, readpast.StateBlocked)
	wantClaim(t, s, "while b runs", nil...)
	mustComplete(t, s, got...)
	got = wantClaim(t, s, "after a and b completed", js[2])
	if got[0].RunAt.Before(before) {
		t.Fatalf("released child's run_at %v, want at least its release (about %v), not its own %v", got[0].RunAt, before, runAt)
	}
	mustComplete(t, s, got...)
	wantCounts(t, s, "at the end", map[readpast.JobState]int64{readpast.StateSucceeded: 3})
	listed := ok(s.List(ctx, readpast.ListParams{State: readpast.StateSucceeded})).must(t)
	if len(listed.Jobs) != 3 {
		t.Fatalf("succeeded jobs listed: %v", ids(listed.Jobs))
	}
}

// testFlowFanIn: a child of two parents is released by the second
// completion only, whether they complete one after the other or at once
// from two goroutines, round after round.
func testFlowFanIn(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	for round := range 30 {
		js := flow(t, fs, fj("p1", "q"), fj("p2", "q"), fj("", "q", readpast.After{Ref: "p1"}, readpast.After{Ref: "p2"}))
		parents := wantClaim(t, s, fmt.Sprintf("round %d: the parents", round), js[0], js[1])
		if round%3 == 0 {
			mustComplete(t, s, parents[0])
			wantState(t, s, js[2].ID, readpast.StateBlocked)
			wantClaim(t, s, fmt.Sprintf("round %d: one parent completed", round), nil...)
			mustComplete(t, s, parents[1])
		} else {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, p := range parents {
				wg.Go(func() { errs[i] = completeOne(ctx, s, p, "") })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("round %d: concurrent completions: %v", round, err)
			}
		}
		wantState(t, s, js[2].ID, readpast.StatePending)
		child := wantClaim(t, s, fmt.Sprintf("round %d: both parents completed", round), js[2])
		mustComplete(t, s, child...)
	}
	wantCounts(t, s, "after every round", map[readpast.JobState]int64{readpast.StateSucceeded: 90})
}

// testFlowPolicies: a parent that ends without succeeding (failed for
// good, cancelled, rescued with its attempts used up) cancels its
// cancel_child child with an error naming it, satisfies its run_anyway
// child's edge, and holds its hold_child child.
func testFlowPolicies(t *testing.T, h Harness) {
	ends := []struct {
		name  string
		state readpast.JobState
		end   func(t *testing.T, s readpast.Store, p *readpast.Job)
	}{
		{"failed", readpast.StateFailed, func(t *testing.T, s readpast.Store, p *readpast.Job) {
			c := wantClaim(t, s, "the parent", p)[0]
			if err := failOne(ctxT(t), s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "boom", Discard: true}); err != nil {
				t.Fatal(err)
			}
		}},
		{"cancelled", readpast.StateCancelled, func(t *testing.T, s readpast.Store, p *readpast.Job) {
			ok(s.Cancel(ctxT(t), p.ID)).must(t)
		}},
		{"cancelled-running", readpast.StateCancelled, func(t *testing.T, s readpast.Store, p *readpast.Job) {
			wantClaim(t, s, "the parent", p)
			ok(s.Cancel(ctxT(t), p.ID)).must(t)
		}},
		{"rescued", readpast.StateFailed, func(t *testing.T, s readpast.Store, p *readpast.Job) {
			const lease = 50 * time.Millisecond
			if got := claim(t, s, 10, lease, queueList(t, s)...); len(got) != 1 || got[0].ID != p.ID {
				t.Fatalf("claimed %v, want the parent %d", ids(got), p.ID)
			}
			expire(t, s, lease)
		}},
	}
	for _, e := range ends {
		t.Run(e.name, func(t *testing.T) {
			s, fs := flowStore(t, h)
			parent := fj("p", "q")
			parent.Job.MaxAttempts = 1
			js := flow(t, fs, parent,
				fj("cancel", "q", readpast.After{Ref: "p"}),
				fj("any", "q", readpast.After{Ref: "p", Policy: readpast.RunAnyway}),
				fj("hold", "q", readpast.After{Ref: "p", Policy: readpast.HoldChild}),
				fj("grandchild", "q", readpast.After{Ref: "cancel", Policy: readpast.RunAnyway}))
			p, cancel, anyway, hold, grand := js[0], js[1], js[2], js[3], js[4]
			e.end(t, s, p)
			wantState(t, s, p.ID, e.state)
			wantCancelledBy(t, s, cancel.ID, p.ID)
			wantState(t, s, hold.ID, readpast.StateBlocked)
			got := wantClaim(t, s, "after the parent ended", anyway, grand)
			mustComplete(t, s, got...)
			want := map[readpast.JobState]int64{readpast.StateCancelled: 1, readpast.StateSucceeded: 2, readpast.StateBlocked: 1}
			want[e.state]++
			wantCounts(t, s, "at the end", want)
		})
	}
}

// testFlowChainCancels: cancelling the head of a chain a -> b -> c cancels
// b and c, each naming its own parent; a chain after a running job too.
func testFlowChainCancels(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	js := flow(t, fs, fj("a", "q"), fj("b", "q", readpast.After{Ref: "a"}), fj("c", "q", readpast.After{Ref: "b"}),
		fj("other", "q"))
	ok(s.Cancel(ctxT(t), js[0].ID)).must(t)
	wantCancelledBy(t, s, js[1].ID, js[0].ID)
	wantCancelledBy(t, s, js[2].ID, js[1].ID)
	wantCounts(t, s, "after the chain's head was cancelled",
		map[readpast.JobState]int64{readpast.StateCancelled: 3, readpast.StatePending: 1})
	wantClaim(t, s, "after the chain was cancelled", js[3])

	// Cancelling a blocked job in the middle by hand cancels what follows
	// it; its parent runs on, and its completion releases nothing.
	js = flow(t, fs, fj("a", "r"), fj("b", "r", readpast.After{Ref: "a"}), fj("c", "r", readpast.After{Ref: "b"}))
	a := wantClaim(t, s, "the second chain's head", js[0])
	if j := ok(s.Cancel(ctxT(t), js[1].ID)).must(t); j.State != readpast.StateCancelled {
		t.Fatalf("Cancel of a blocked job returned %+v", j)
	}
	wantCancelledBy(t, s, js[2].ID, js[1].ID)
	mustComplete(t, s, a...)
	wantClaim(t, s, "after the head of a cancelled chain completed", nil...)

	// BulkCancel of a queue with parents and children counts each once.
	flow(t, fs, fj("a", "bulk"), fj("b", "bulk", readpast.After{Ref: "a"}), fj("c", "bulk", readpast.After{Ref: "b"}))
	if n := ok(s.BulkCancel(ctxT(t), readpast.JobFilter{Queue: "bulk"})).must(t); n != 1 && n != 3 {
		t.Fatalf("BulkCancel of a chain of 3 cancelled %d, want 1 (its children went with it) or 3", n)
	}
	for _, j := range ok(s.List(ctxT(t), readpast.ListParams{Queue: "bulk"})).must(t).Jobs {
		if j.State != readpast.StateCancelled {
			t.Fatalf("after BulkCancel: job %d is %s", j.ID, j.State)
		}
	}
}

// testFlowHoldThenRetry: a held child stays blocked while its parent is
// failed (Delete refused, Prune skips the parent), through a retry that
// fails again, and is released by the retried parent's success.
func testFlowHoldThenRetry(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	js := flow(t, fs, fj("p", "q"), fj("c", "q", readpast.After{Ref: "p", Policy: readpast.HoldChild}))
	p, c := js[0], js[1]
	for round := range 2 {
		got := wantClaim(t, s, fmt.Sprintf("round %d: the parent", round), p)
		if err := failOne(ctx, s, readpast.Failure{ID: got[0].ID, Token: got[0].Token, Message: "boom", Discard: true}); err != nil {
			t.Fatal(err)
		}
		wantState(t, s, c.ID, readpast.StateBlocked)
		if err := s.Delete(ctx, p.ID); !errors.Is(err, readpast.ErrInvalidState) {
			t.Fatalf("Delete of a parent that holds a child: %v, want ErrInvalidState", err)
		}
		if n, err := s.BulkDelete(ctx, readpast.JobFilter{Queue: "q"}); err != nil || n != 0 {
			t.Fatalf("BulkDelete of a parent that holds a child: %d, %v; want 0 deleted", n, err)
		}
		if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 0 {
			t.Fatalf("Prune deleted %d jobs, want the parent that holds a child kept", n)
		}
		wantState(t, s, p.ID, readpast.StateFailed)
		if j := ok(s.Retry(ctx, p.ID)).must(t); j.State != readpast.StatePending {
			t.Fatalf("Retry of the parent: %+v", j)
		}
		wantState(t, s, c.ID, readpast.StateBlocked)
	}
	got := wantClaim(t, s, "the retried parent", p)
	mustComplete(t, s, got...)
	got = wantClaim(t, s, "after the retried parent succeeded", c)
	mustComplete(t, s, got...)
	if err := s.Delete(ctx, p.ID); err != nil {
		t.Fatalf("Delete of a parent whose child ran: %v", err)
	}

	// A held child cancelled by hand: its parent holds nothing any more.
	js = flow(t, fs, fj("p", "r"), fj("c", "r", readpast.After{Ref: "p", Policy: readpast.HoldChild}))
	ok(s.Cancel(ctx, js[0].ID)).must(t)
	wantState(t, s, js[1].ID, readpast.StateBlocked)
	ok(s.Cancel(ctx, js[1].ID)).must(t)
	if n := pruneBefore(t, s, time.Now().Add(time.Hour)); n != 3 {
		t.Fatalf("Prune after the held child was cancelled deleted %d, want both jobs and the first flow's child", n)
	}
}

// testFlowStaleParent: a rescue with attempts left resolves nothing, and
// the stale attempt's completion after another claim releases nothing.
func testFlowStaleParent(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	parent := fj("p", "q")
	parent.Job.MaxAttempts = 3
	js := flow(t, fs, parent, fj("c", "q", readpast.After{Ref: "p"}))
	const lease = 50 * time.Millisecond
	old := claim(t, s, 10, lease, queueList(t, s)...)
	if len(old) != 1 || old[0].ID != js[0].ID {
		t.Fatalf("claimed %v, want the parent", ids(old))
	}
	expire(t, s, lease)
	wantState(t, s, js[1].ID, readpast.StateBlocked)
	cur := wantClaim(t, s, "the rescued parent", js[0])
	if err := completeOne(ctx, s, old[0], ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale completion: %v, want ErrStaleToken", err)
	}
	wantState(t, s, js[1].ID, readpast.StateBlocked)
	wantClaim(t, s, "after a stale completion", nil...)
	mustComplete(t, s, cur...)
	wantClaim(t, s, "after the current completion", js[1])
}

// testFlowExistingParents: an edge to an earlier job by id, live in any
// state, holds its child until it succeeds; a finished or unknown one
// refuses the whole flow, storing nothing.
func testFlowExistingParents(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	pending := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q"})[0]
	running := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "r"})[0]
	held := claim(t, s, 1, time.Minute, "r")
	blocked := flow(t, fs, fj("", "b", readpast.After{JobID: pending.ID}))[0]
	js := flow(t, fs, fj("c", "q", readpast.After{JobID: pending.ID}, readpast.After{JobID: running.ID},
		readpast.After{JobID: blocked.ID, Policy: readpast.RunAnyway}))
	mustComplete(t, s, held...)
	wantState(t, s, js[0].ID, readpast.StateBlocked)
	got := wantClaim(t, s, "the earlier pending parent", pending)
	mustComplete(t, s, got...)
	got = wantClaim(t, s, "the blocked parent, released", blocked)
	wantState(t, s, js[0].ID, readpast.StateBlocked)
	if err := failOne(ctx, s, readpast.Failure{ID: got[0].ID, Token: got[0].Token, Discard: true}); err != nil {
		t.Fatal(err)
	}
	wantClaim(t, s, "after every parent ended", js[0])

	before := stateCounts(t, s)
	for _, tc := range []struct {
		name string
		id   int64
		want error
		text string
	}{
		{"finished", pending.ID, readpast.ErrInvalidState, "succeeded"},
		{"unknown", pending.ID + 1000, readpast.ErrNotFound, ""},
	} {
		_, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{fj("x", "n"), fj("", "n", readpast.After{Ref: "x"}, readpast.After{JobID: tc.id})})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), fmt.Sprint(tc.id)) || !strings.Contains(err.Error(), tc.text) {
			t.Fatalf("a flow after a %s job: %v; want %v naming job %d %s", tc.name, err, tc.want, tc.id, tc.text)
		}
		var pe *readpast.ParentError
		if !errors.As(err, &pe) || pe.ID != tc.id || string(pe.State) != tc.text {
			t.Fatalf("a flow after a %s job: %v; want a *readpast.ParentError{%d, %q}", tc.name, err, tc.id, tc.text)
		}
		wantCounts(t, s, "after a refused flow", before)
		if l := ok(s.List(ctx, readpast.ListParams{Queue: "n"})).must(t); len(l.Jobs) != 0 {
			t.Fatalf("a refused flow stored %v", ids(l.Jobs))
		}
	}
}

// testFlowInvalid: NormalizeFlow's refusals come back from the store as
// *readpast.FieldError naming the job, and store nothing.
func testFlowInvalid(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	keyed := fj("u", "q")
	keyed.Job.UniqueKey = "k1"
	for _, tc := range []struct {
		name  string
		jobs  []readpast.FlowJob
		field string
	}{
		{"empty", nil, "jobs"},
		{"cycle", []readpast.FlowJob{fj("a", "q", readpast.After{Ref: "c"}), fj("b", "q", readpast.After{Ref: "a"}),
			fj("c", "q", readpast.After{Ref: "b"})}, "after"},
		{"missing ref", []readpast.FlowJob{fj("a", "q"), fj("b", "q", readpast.After{Ref: "nope"})}, "jobs[1].after[0].ref"},
		{"self", []readpast.FlowJob{fj("a", "q", readpast.After{Ref: "a"})}, "jobs[0].after[0].ref"},
		{"duplicate parent", []readpast.FlowJob{fj("a", "q"), fj("b", "q", readpast.After{Ref: "a"}, readpast.After{Ref: "a"})},
			"jobs[1].after[1].ref"},
		{"duplicate ref", []readpast.FlowJob{fj("a", "q"), fj("a", "q")}, "jobs[1].ref"},
		{"unique key", []readpast.FlowJob{fj("a", "q"), keyed}, "jobs[1].unique_key"},
		{"no parent", []readpast.FlowJob{fj("a", "q", readpast.After{})}, "jobs[0].after[0]"},
		{"bad policy", []readpast.FlowJob{fj("a", "q"), fj("b", "q", readpast.After{Ref: "a", Policy: "later"})},
			"jobs[1].after[0].policy"},
	} {
		out, err := fs.EnqueueFlow(ctx, tc.jobs)
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || !strings.Contains(fe.Field, tc.field) || out != nil {
			t.Fatalf("%s: EnqueueFlow = %v, %v; want a *FieldError naming %s", tc.name, out, err, tc.field)
		}
	}
	wantCounts(t, s, "after refused flows", map[readpast.JobState]int64{})
}

// testFlowBlockedJobs: blocked jobs are listed, counted (Stats, Queues)
// and cancellable, and refuse CancelPending, RunNow and Retry naming
// their state.
func testFlowBlockedJobs(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	js := flow(t, fs, fj("p", "parents"), fj("a", "q", readpast.After{Ref: "p"}), fj("b", "q", readpast.After{Ref: "p"}))
	if l := ok(s.List(ctx, readpast.ListParams{State: readpast.StateBlocked})).must(t); !slices.Equal(ids(l.Jobs), []int64{js[2].ID, js[1].ID}) {
		t.Fatalf("blocked jobs listed: %v", ids(l.Jobs))
	}
	var inQ int64
	for _, q := range ok(s.Queues(ctx)).must(t) {
		if q.Name == "q" {
			inQ = q.Counts[readpast.StateBlocked]
		}
	}
	if inQ != 2 {
		t.Fatalf("Queues counts %d blocked jobs in q, want 2", inQ)
	}
	for _, op := range []struct {
		name string
		do   func() (*readpast.Job, error)
	}{
		{"CancelPending", func() (*readpast.Job, error) { return s.CancelPending(ctx, js[1].ID) }},
		{"RunNow", func() (*readpast.Job, error) { return s.RunNow(ctx, js[1].ID) }},
		{"Retry", func() (*readpast.Job, error) { return s.Retry(ctx, js[1].ID) }},
	} {
		if j, err := op.do(); !errors.Is(err, readpast.ErrInvalidState) || !strings.Contains(err.Error(), "blocked") || j != nil {
			t.Fatalf("%s of a blocked job: %+v, %v; want ErrInvalidState naming blocked", op.name, j, err)
		}
	}
	wantState(t, s, js[1].ID, readpast.StateBlocked)
	if j := ok(s.Cancel(ctx, js[1].ID)).must(t); j.State != readpast.StateCancelled || len(j.Errors) != 0 {
		t.Fatalf("Cancel of a blocked job: %+v", j)
	}
	wantCounts(t, s, "after a blocked job was cancelled", map[readpast.JobState]int64{
		readpast.StatePending: 1, readpast.StateBlocked: 1, readpast.StateCancelled: 1})
	got := wantClaim(t, s, "the parent", js[0])
	mustComplete(t, s, got...)
	wantClaim(t, s, "the parent's child left", js[2])
	wantCounts(t, s, "at the end", map[readpast.JobState]int64{
		readpast.StateRunning: 1, readpast.StateSucceeded: 1, readpast.StateCancelled: 1})
}

// testFlowGroupedChild: a released child of a concurrency key is claimed
// as a job enqueued for the key is: only while the key has a free slot.
func testFlowGroupedChild(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	busy := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "fg"})[0]
	child := fj("c", "q", readpast.After{Ref: "p"})
	child.Job.Group = "fg"
	later := fj("", "q", readpast.After{Ref: "p"})
	later.Job.Group = "fg"
	js := flow(t, fs, fj("p", "q"), child, later)
	got := wantClaim(t, s, "the key's job and the parent", busy, js[0])
	var running *readpast.Job
	for _, j := range got {
		if j.ID == js[0].ID {
			mustComplete(t, s, j)
		} else {
			running = j
		}
	}
	wantState(t, s, js[1].ID, readpast.StatePending)
	wantClaim(t, s, "released into a key at its limit", nil...)
	mustComplete(t, s, running)
	got = wantClaim(t, s, "after the key's slot was freed", js[1])
	mustComplete(t, s, got...)
	got = wantClaim(t, s, "the key's next released job", js[2])
	mustComplete(t, s, got...)

	// A free key: the released child is claimable at once.
	c2 := fj("", "q", readpast.After{Ref: "p"})
	c2.Job.Group = "free"
	js = flow(t, fs, fj("p", "q"), c2)
	mustComplete(t, s, wantClaim(t, s, "the parent", js[0])...)
	wantClaim(t, s, "a released child of a free key", js[1])
}

// testFlowWakes: a completion that releases a child wakes the store's
// subscribers (stores that implement readpast.Notifier).
func testFlowWakes(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	n, isNotifier := s.(readpast.Notifier)
	if !isNotifier {
		t.Skipf("%T does not implement readpast.Notifier", s)
	}
	ctx := ctxT(t)
	js := flow(t, fs, fj("p", "q"), fj("c", "q", readpast.After{Ref: "p"}))
	p := wantClaim(t, s, "the parent", js[0])
	ch := ok(n.Subscribe(ctx)).must(t)
	time.Sleep(100 * time.Millisecond)
	for len(ch) > 0 {
		<-ch
	}
	mustComplete(t, s, p...)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up within 5s of a completion that released a child")
	}
	wantClaim(t, s, "the released child", js[1])
}

// testFlowPruneKeepsParentsOfLiveChildren: retention keeps a finished
// parent while a job that runs after it is live (blocked, pending or
// running), so the child reads its result when it runs; once the child
// has finished, both go.
func testFlowPruneKeepsParentsOfLiveChildren(t *testing.T, h Harness) {
	s, fs := flowStore(t, h)
	ctx := ctxT(t)
	js := flow(t, fs, fj("p", "q"), fj("", "q", readpast.After{Ref: "p"}))
	p, c := js[0], js[1]
	got := wantClaim(t, s, "the parent", p)
	if err := completeOne(ctx, s, got[0], `{"rows":3}`); err != nil {
		t.Fatal(err)
	}
	prune := func() int {
		return pruneBefore(t, s, time.Now().Add(time.Hour))
	}
	if n := prune(); n != 0 {
		t.Fatalf("pruned %d jobs while the child is pending", n)
	}
	got = wantClaim(t, s, "the child", c)
	if n := prune(); n != 0 {
		t.Fatalf("pruned %d jobs while the child runs", n)
	}
	if j := get(t, s, p.ID); strings.ReplaceAll(string(j.Result), " ", "") != `{"rows":3}` {
		t.Fatalf("the parent's result while the child runs: %s", j.Result)
	}
	mustComplete(t, s, got...)
	if n := prune(); n != 2 {
		t.Fatalf("pruned %d jobs once the child finished, want the parent and the child", n)
	}
}
