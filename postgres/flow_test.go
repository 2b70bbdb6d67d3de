package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestFlowSmoke walks the PostgreSQL flow path end to end: a child runs
// only after both parents completed, a failed parent cancels its child
// and the child's child, and a held child waits for its parent's retry.
func TestFlowSmoke(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	q := "flow"
	p := func(kind string) readpast.EnqueueParams { return readpast.EnqueueParams{Kind: kind, Queue: q} }
	jobs, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "a", Job: p("a")},
		{Ref: "b", Job: p("b")},
		{Ref: "c", Job: p("c"), After: []readpast.After{{Ref: "a"}, {Ref: "b"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if jobs[2].State != readpast.StateBlocked {
		t.Fatalf("child is %s", jobs[2].State)
	}
	claim := func(want int) []*readpast.Job {
		t.Helper()
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{q}, Limit: 10, Lease: time.Minute, Worker: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("claimed %d jobs, want %d", len(got), want)
		}
		return got
	}
	ab := claim(2)
	complete := func(j *readpast.Job) {
		t.Helper()
		errs, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
	}
	complete(ab[0])
	claim(0)
	complete(ab[1])
	c := claim(1)
	if c[0].ID != jobs[2].ID {
		t.Fatalf("claimed %d, want the child %d", c[0].ID, jobs[2].ID)
	}

	// Cancel cascades.
	jobs, err = s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "a", Job: p("a")},
		{Ref: "b", Job: p("b"), After: []readpast.After{{Ref: "a"}}},
		{Ref: "c", Job: p("c"), After: []readpast.After{{Ref: "b"}}},
		{Ref: "d", Job: p("d"), After: []readpast.After{{Ref: "a", Policy: readpast.HoldChild}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := claim(1)
	errs, err := s.Fail(ctx, []readpast.Failure{{ID: a[0].ID, Token: a[0].Token, Message: "boom", Discard: true}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	for _, i := range []int{1, 2} {
		j, err := s.Get(ctx, jobs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != readpast.StateCancelled || len(j.Errors) == 0 || !strings.Contains(j.Errors[len(j.Errors)-1].Message, "parent job") {
			t.Fatalf("job %d: %s %+v", i, j.State, j.Errors)
		}
	}
	d, _ := s.Get(ctx, jobs[3].ID)
	if d.State != readpast.StateBlocked {
		t.Fatalf("held child is %s", d.State)
	}
	if err := s.Delete(ctx, jobs[0].ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("delete of a holding parent: %v", err)
	}
	if _, err := s.Retry(ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	a = claim(1)
	complete(a[0])
	if c := claim(1); c[0].ID != jobs[3].ID {
		t.Fatalf("claimed %d, want the held child", c[0].ID)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", stats)

	// Existing parents.
	if _, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: p("x"), After: []readpast.After{{JobID: jobs[0].ID}}}}); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("finished parent: %v", err)
	}
	if _, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: p("x"), After: []readpast.After{{JobID: 1 << 40}}}}); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("unknown parent: %v", err)
	}
}

// TestFlowInTheCallersTransaction: a flow stored in the caller's
// transaction (pgx and database/sql) exists only if it commits.
func TestFlowInTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	flow := []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}},
		{Job: readpast.EnqueueParams{Kind: "b"}, After: []readpast.After{{Ref: "a"}}},
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.EnqueueFlowTx(ctx, tx, flow)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, gone[1].ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("a rolled back flow's job: %v", err)
	}
	stx := pgharness.Harness().BeginSQLTx(t, s)
	kept, err := s.EnqueueFlowSQLTx(ctx, stx, flow)
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Get(ctx, kept[1].ID); err != nil || j.State != readpast.StateBlocked {
		t.Fatalf("a committed flow's child: %v %v", j, err)
	}
	a := mustClaim(t, s, "w", 5)
	if len(a) != 1 || a[0].ID != kept[0].ID {
		t.Fatalf("claimed %v, want the parent alone", a)
	}
	if err := first(s.Complete(ctx, []readpast.Completion{{ID: a[0].ID, Token: a[0].Token}})); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, kept[1].ID); got != readpast.StatePending {
		t.Fatalf("child is %s after its parent completed", got)
	}
}

// TestFlowDepth: a chain as deep as readpast.MaxFlowDepth is stored and
// cancelled whole from its top in one transaction; a flow that would
// make it deeper, in itself or under the chain's last job, is refused.
func TestFlowDepth(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	chain := func(n int) []readpast.FlowJob {
		jobs := make([]readpast.FlowJob, n)
		for i := range jobs {
			jobs[i] = readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: readpast.EnqueueParams{Kind: "k", Queue: "deep"}}
			if i > 0 {
				jobs[i].After = []readpast.After{{Ref: fmt.Sprint("j", i-1)}}
			}
		}
		return jobs
	}
	if _, err := s.EnqueueFlow(ctx, chain(readpast.MaxFlowDepth+2)); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("a chain of %d: %v", readpast.MaxFlowDepth+2, err)
	}
	out, err := s.EnqueueFlow(ctx, chain(readpast.MaxFlowDepth+1))
	if err != nil {
		t.Fatal(err)
	}
	last := out[len(out)-1]
	_, err = s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k", Queue: "deep"}, After: []readpast.After{{JobID: last.ID}}}})
	if !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("a job under the chain's last: %v", err)
	}
	if _, err := s.Cancel(ctx, out[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, last.ID); got != readpast.StateCancelled {
		t.Fatalf("the chain's last job is %s after its top was cancelled", got)
	}
}
