package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Flow inspection and outputs (docs/design/workflows.md, "Outputs and
// inspection"): the refs an edge records, a job's relatives, the graph
// around a job, and the parents' results a child's handler reads.

// inspector makes a store for a flow inspection test.
func inspector(t *testing.T, h Harness) (readpast.Store, readpast.FlowStore, readpast.FlowInspector) {
	t.Helper()
	s, fs := flowStore(t, h)
	fi, ok := s.(readpast.FlowInspector)
	if !ok {
		t.Fatalf("%T keeps flows but is no readpast.FlowInspector", s)
	}
	return s, fs, fi
}

// parentResulter is what a claim that asks for parent results reads
// from a store (httpapi): both stores have it.
type parentResulter interface {
	ParentResults(ctx context.Context, ids []int64) (map[int64]map[string]json.RawMessage, error)
}

// relativesOf reads id's relatives and renders each side as
// "id:parent_ref>child_ref:policy:state:job_state" lines.
func relativesOf(t *testing.T, fi readpast.FlowInspector, id int64, limit int) (parents, children []string) {
	t.Helper()
	ps, cs, err := fi.Relatives(ctxT(t), id, limit)
	if err != nil {
		t.Fatalf("Relatives(%d): %v", id, err)
	}
	render := func(rs []readpast.Relative, parent bool) []string {
		var out []string
		for _, r := range rs {
			e := r.Edge
			if (parent && e.ChildID != id) || (!parent && e.ParentID != id) {
				t.Fatalf("Relatives(%d): edge %+v does not end at the job", id, e)
			}
			other := e.ParentID
			if !parent {
				other = e.ChildID
			}
			if r.Job == nil || r.Job.ID != other {
				t.Fatalf("Relatives(%d): edge %+v carries job %+v, want job %d", id, e, r.Job, other)
			}
			out = append(out, fmt.Sprintf("%d:%s>%s:%s:%s:%s", other, e.ParentRef, e.ChildRef, e.Policy, e.State, r.Job.State))
		}
		return out
	}
	return render(ps, true), render(cs, false)
}

func wantLines(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// testFlowRelatives: each edge records the refs of its two ends (empty
// for a job without one, or named by id); Relatives lists a job's
// parents and children in id order, with their edges and jobs as they
// stand, at most limit of each; an edge resolves to done when its parent
// succeeds.
func testFlowRelatives(t *testing.T, h Harness) {
	s, fs, fi := inspector(t, h)
	ctx := ctxT(t)
	old := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "fi"})[0]
	jobs := flow(t, fs,
		fj("a", "fi"),
		fj("b", "fi", readpast.After{Ref: "a"}),
		fj("", "fi", readpast.After{Ref: "a", Policy: readpast.RunAnyway}, readpast.After{Ref: "b"}, readpast.After{JobID: old.ID, Policy: readpast.HoldChild}),
	)
	a, b, c := jobs[0], jobs[1], jobs[2]
	p, ch := relativesOf(t, fi, a.ID, 0)
	wantLines(t, "parents of a", p)
	wantLines(t, "children of a", ch,
		fmt.Sprintf("%d:a>b:cancel_child:open:blocked", b.ID),
		fmt.Sprintf("%d:a>:run_anyway:open:blocked", c.ID))
	p, ch = relativesOf(t, fi, c.ID, 0)
	wantLines(t, "parents of c", p,
		fmt.Sprintf("%d:>:hold_child:open:pending", old.ID),
		fmt.Sprintf("%d:a>:run_anyway:open:pending", a.ID),
		fmt.Sprintf("%d:b>:cancel_child:open:blocked", b.ID))
	wantLines(t, "children of c", ch)
	p, _ = relativesOf(t, fi, c.ID, 2)
	if len(p) != 2 || p[0] != fmt.Sprintf("%d:>:hold_child:open:pending", old.ID) {
		t.Fatalf("parents of c, limit 2: %q; want the first two in id order", p)
	}
	_, ch = relativesOf(t, fi, old.ID, 0)
	wantLines(t, "children of the earlier job", ch, fmt.Sprintf("%d:>:hold_child:open:blocked", c.ID))

	// a succeeds with a result: its edges are done, and the parents of b
	// show it finished, with the result.
	got := claim(t, s, 10, time.Minute, "fi")
	slices.SortFunc(got, func(x, y *readpast.Job) int { return int(x.ID - y.ID) })
	if len(got) != 2 || got[0].ID != old.ID || got[1].ID != a.ID {
		t.Fatalf("claimed %v, want the earlier job and a", ids(got))
	}
	if err := completeOne(ctx, s, got[1], `{"rows":3}`); err != nil {
		t.Fatal(err)
	}
	p, _ = relativesOf(t, fi, b.ID, 0)
	wantLines(t, "parents of b after a succeeded", p, fmt.Sprintf("%d:a>b:cancel_child:done:succeeded", a.ID))
	ps, _, err := fi.Relatives(ctx, b.ID, 0)
	if js, _ := json.Marshal(ps[0].Job.Result); err != nil || string(js) != `{"rows":3}` {
		t.Fatalf("parent a of b: %+v, %v; want its result {\"rows\":3}", ps, err)
	}

	// A job outside flows has no relatives; an unknown one is not found.
	lone := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "other"})[0]
	p, ch = relativesOf(t, fi, lone.ID, 0)
	if len(p)+len(ch) != 0 {
		t.Fatalf("a job outside flows has relatives %q %q", p, ch)
	}
	if _, _, err := fi.Relatives(ctx, c.ID+1000, 0); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("Relatives of an unknown job: %v, want ErrNotFound", err)
	}

	// The batch read a claim makes: parents by ref, or by id in decimal;
	// nil until a parent succeeded; jobs without parents left out.
	pr, isPR := s.(parentResulter)
	if !isPR {
		t.Fatalf("%T has no ParentResults", s)
	}
	res, err := pr.ParentResults(ctx, []int64{a.ID, b.ID, c.ID, lone.ID})
	if err != nil {
		t.Fatal(err)
	}
	jb, _ := json.Marshal(res[b.ID])
	jc, _ := json.Marshal(res[c.ID])
	wantC := fmt.Sprintf(`{"%d":null,"a":{"rows":3},"b":null}`, old.ID)
	if len(res) != 2 || string(jb) != `{"a":{"rows":3}}` || string(jc) != wantC {
		t.Fatalf("ParentResults = %v (b: %s, c: %s); want b: {\"a\":{\"rows\":3}}, c: %s, no others", res, jb, jc, wantC)
	}
}

// testFlowGraph: FlowGraph walks edges both ways, breadth first, id
// first; a diamond comes whole from any of its jobs; a graph larger than
// the limit comes truncated, nearest jobs first, with only the edges
// between those returned; an unknown id is not found.
func testFlowGraph(t *testing.T, h Harness) {
	_, fs, fi := inspector(t, h)
	ctx := ctxT(t)
	d := flow(t, fs,
		fj("a", "fg"),
		fj("b", "fg", readpast.After{Ref: "a"}),
		fj("c", "fg", readpast.After{Ref: "a"}),
		fj("d", "fg", readpast.After{Ref: "b"}, readpast.After{Ref: "c", Policy: readpast.RunAnyway}),
	)
	a, b, c, dd := d[0].ID, d[1].ID, d[2].ID, d[3].ID
	graph := func(id int64, limit int) (string, string, bool) {
		t.Helper()
		g, err := fi.FlowGraph(ctx, id, limit)
		if err != nil {
			t.Fatalf("FlowGraph(%d, %d): %v", id, limit, err)
		}
		var js, es []string
		for _, j := range g.Jobs {
			js = append(js, fmt.Sprint(j.ID))
		}
		for _, e := range g.Edges {
			es = append(es, fmt.Sprintf("%d>%d:%s>%s:%s", e.ParentID, e.ChildID, e.ParentRef, e.ChildRef, e.Policy))
		}
		return fmt.Sprint(js), fmt.Sprint(es), g.Truncated
	}
	edges := fmt.Sprint([]string{
		fmt.Sprintf("%d>%d:a>b:cancel_child", a, b), fmt.Sprintf("%d>%d:a>c:cancel_child", a, c),
		fmt.Sprintf("%d>%d:b>d:cancel_child", b, dd), fmt.Sprintf("%d>%d:c>d:run_anyway", c, dd)})
	for _, tc := range []struct {
		from  int64
		order []int64
	}{{a, []int64{a, b, c, dd}}, {dd, []int64{dd, b, c, a}}, {c, []int64{c, a, dd, b}}} {
		js, es, tr := graph(tc.from, 0)
		if want := fmt.Sprint(tc.order); js != want || es != edges || tr {
			t.Fatalf("diamond from %d: jobs %s, edges %s, truncated %v; want jobs %s, edges %s, whole", tc.from, js, es, tr, want, edges)
		}
	}

	// A fan of five children under p, and a grandchild under the last:
	// from p with limit 3, p and its first two children.
	fan := flow(t, fs,
		fj("p", "fg"),
		fj("c1", "fg", readpast.After{Ref: "p"}), fj("c2", "fg", readpast.After{Ref: "p"}),
		fj("c3", "fg", readpast.After{Ref: "p"}), fj("c4", "fg", readpast.After{Ref: "p"}),
		fj("c5", "fg", readpast.After{Ref: "p"}),
		fj("g", "fg", readpast.After{Ref: "c5"}),
	)
	p := fan[0].ID
	js, es, tr := graph(p, 3)
	if want := fmt.Sprint([]int64{p, fan[1].ID, fan[2].ID}); js != want || !tr ||
		es != fmt.Sprint([]string{fmt.Sprintf("%d>%d:p>c1:cancel_child", p, fan[1].ID), fmt.Sprintf("%d>%d:p>c2:cancel_child", p, fan[2].ID)}) {
		t.Fatalf("fan from p, limit 3: jobs %s, edges %s, truncated %v; want jobs %s, truncated, the two edges between them", js, es, tr, want)
	}
	// From the grandchild: g, c5, p, then the others: nearest first.
	js, _, tr = graph(fan[6].ID, 4)
	if want := fmt.Sprint([]int64{fan[6].ID, fan[5].ID, p, fan[1].ID}); js != want || !tr {
		t.Fatalf("fan from g, limit 4: jobs %s, truncated %v; want %s, truncated", js, tr, want)
	}
	// Exactly as many jobs as the limit: whole.
	if js, _, tr := graph(p, 7); tr || len(fan) != 7 || js != fmt.Sprint(ids(fan)) {
		t.Fatalf("fan from p, limit 7: jobs %s, truncated %v; want all seven, whole", js, tr)
	}

	// A job outside flows is a graph of one; an unknown id is not found.
	lone := flow(t, fs, fj("", "fg"))[0]
	if js, es, tr := graph(lone.ID, 0); js != fmt.Sprint([]int64{lone.ID}) || es != "[]" || tr {
		t.Fatalf("graph of a lone job: %s %s %v", js, es, tr)
	}
	if _, err := fi.FlowGraph(ctx, lone.ID+1000, 0); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("FlowGraph of an unknown job: %v, want ErrNotFound", err)
	}
}

// testFlowParentResults: through a Client and its workers, a child's
// handler reads its parents' results by ref (Job.ParentResults) and its
// parents (Job.Parents); a RunAnyway child of a failed parent sees nil
// for it. A job read from the store has no client: ErrNoRelatives.
func testFlowParentResults(t *testing.T, h Harness) {
	s, _, _ := inspector(t, h)
	type seen struct {
		results map[string]json.RawMessage
		parents []readpast.Relative
		err     error
	}
	got := make(chan seen, 1)
	workers := readpast.NewWorkers()
	workers.Handle("extract", func(ctx context.Context, j *readpast.Job) (any, error) {
		return map[string]int{"rows": 3}, nil
	}, nil)
	workers.Handle("flaky", func(ctx context.Context, j *readpast.Job) (any, error) {
		return nil, errors.New("flaky fails for good")
	}, nil)
	workers.Handle("report", func(ctx context.Context, j *readpast.Job) (any, error) {
		res, err := j.ParentResults(ctx)
		var ps []readpast.Relative
		if err == nil {
			ps, err = j.Parents(ctx)
		}
		got <- seen{res, ps, err}
		return nil, nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := readpast.NewClient(s, readpast.Config{
		Workers:      workers,
		Queues:       map[string]readpast.QueueConfig{"pr": {MaxWorkers: 2}},
		Lease:        time.Minute,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.EnqueueFlow(ctxT(t),
		readpast.FlowJob{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Queue: "pr"}},
		readpast.FlowJob{Ref: "flaky", Job: readpast.EnqueueParams{Kind: "flaky", Queue: "pr", MaxAttempts: 1}},
		readpast.FlowJob{Ref: "report", Job: readpast.EnqueueParams{Kind: "report", Queue: "pr"},
			After: []readpast.After{{Ref: "extract"}, {Ref: "flaky", Policy: readpast.RunAnyway}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Stop(context.Background())
	})
	var r seen
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not run within 20 s of its flow")
	}
	if r.err != nil {
		t.Fatalf("the child's handler: %v", r.err)
	}
	if js, _ := json.Marshal(r.results); string(js) != `{"extract":{"rows":3},"flaky":null}` {
		t.Fatalf("ParentResults in the child's handler = %s; want extract's result and null for the failed flaky", js)
	}
	if len(r.parents) != 2 || r.parents[0].Job.ID != out[0].ID || r.parents[0].Job.State != readpast.StateSucceeded ||
		r.parents[1].Job.ID != out[1].ID || r.parents[1].Job.State != readpast.StateFailed {
		t.Fatalf("Parents in the child's handler: %+v; want extract succeeded, flaky failed", r.parents)
	}
	stored := get(t, s, out[2].ID)
	if _, err := stored.ParentResults(ctxT(t)); !errors.Is(err, readpast.ErrNoRelatives) {
		t.Fatalf("ParentResults of a job read from the store: %v, want ErrNoRelatives", err)
	}
	if _, err := stored.Parents(ctxT(t)); !errors.Is(err, readpast.ErrNoRelatives) {
		t.Fatalf("Parents of a job read from the store: %v, want ErrNoRelatives", err)
	}
	parents, _, err := c.Relatives(ctxT(t), out[2].ID, 0)
	if err != nil || len(parents) != 2 {
		t.Fatalf("Client.Relatives: %v, %v", parents, err)
	}
}
