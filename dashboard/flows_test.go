package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestBlockedJobs: the job list offers the state blocked and filters by
// it, shows a blocked job's state styled as such, and a blocked job's page
// offers Cancel (and neither Run now nor Retry), which cancels it.
func TestBlockedJobs(t *testing.T) {
	e := newEnv(t, false)
	fs, ok := e.store.(readpast.FlowStore)
	if !ok {
		t.Fatalf("%T is not a readpast.FlowStore", e.store)
	}
	jobs, err := fs.EnqueueFlow(context.Background(), []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "parent", Queue: "fl"}},
		{Job: readpast.EnqueueParams{Kind: "child", Queue: "fl"}, After: []readpast.After{{Ref: "a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent, child := jobs[0], jobs[1]
	if child.State != readpast.StateBlocked {
		t.Fatalf("child is %s, want blocked", child.State)
	}

	list := e.do(req{path: "/jobs"})
	if list.status != http.StatusOK || !strings.Contains(list.body, `<option value="blocked"`) {
		t.Fatalf("the job list's state filter lacks blocked: %d\n%s", list.status, list.body)
	}
	blocked := e.do(req{path: "/jobs?state=blocked"})
	rows := regexp.MustCompile(`<tr id="job-(\d+)">`).FindAllStringSubmatch(blocked.body, -1)
	if blocked.status != http.StatusOK || len(rows) != 1 || rows[0][1] != strconv.FormatInt(child.ID, 10) ||
		!strings.Contains(blocked.body, `<span class="state blocked">blocked</span>`) {
		t.Fatalf("/jobs?state=blocked: %d, rows %v\n%s", blocked.status, rows, blocked.body)
	}
	if css := e.do(req{path: "/static/style.css"}); !strings.Contains(css.body, ".state.blocked") {
		t.Error("style.css has no style for the state blocked")
	}

	page := e.do(req{path: "/jobs/" + strconv.FormatInt(child.ID, 10)})
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="action-cancel"`) ||
		strings.Contains(page.body, `id="action-run"`) || strings.Contains(page.body, `id="action-retry"`) {
		t.Fatalf("a blocked job's page: %d\n%s", page.status, page.body)
	}
	r := e.do(req{method: "POST", path: "/jobs/" + strconv.FormatInt(child.ID, 10) + "/cancel",
		form: url.Values{csrfField: {csrfOf(t, page.body)}}})
	if r.status != http.StatusSeeOther || e.state(child.ID) != readpast.StateCancelled {
		t.Fatalf("cancel a blocked job: %d, job %s\n%s", r.status, e.state(child.ID), r.body)
	}
	if e.state(parent.ID) != readpast.StatePending {
		t.Errorf("cancelling the child changed its parent: %s", e.state(parent.ID))
	}
}

// finish claims the pending job id of queue q and completes it (or, when
// fail, fails it for good).
func finish(t *testing.T, st readpast.Store, q string, id int64, fail bool) {
	t.Helper()
	ctx := context.Background()
	c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != id {
		t.Fatalf("claim job %d of %s: %v %v", id, q, c, err)
	}
	var errs []error
	if fail {
		errs, err = st.Fail(ctx, []readpast.Failure{{ID: id, Token: c[0].Token, Message: "boom", Discard: true}})
	} else {
		errs, err = st.Complete(ctx, []readpast.Completion{{ID: id, Token: c[0].Token}})
	}
	if err != nil || errs[0] != nil {
		t.Fatalf("finish job %d: %v %v", id, err, errs)
	}
}

// enqueueFlow stores a flow on e's store.
func (e *env) enqueueFlow(jobs ...readpast.FlowJob) []*readpast.Job {
	e.t.Helper()
	fs, ok := e.store.(readpast.FlowStore)
	if !ok {
		e.t.Fatalf("%T is not a readpast.FlowStore", e.store)
	}
	out, err := fs.EnqueueFlow(context.Background(), jobs)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestJobPageRelatives: a job's page lists its parents and its children,
// each with a link, its ref, kind, state, and the edge's policy and
// state, and links to the flow page; a job outside flows shows none of
// it. Past relativesShown, the list stops and says so.
func TestJobPageRelatives(t *testing.T) {
	e := newEnv(t, false)
	if _, ok := e.store.(readpast.FlowInspector); !ok {
		t.Fatalf("%T is not a readpast.FlowInspector", e.store)
	}
	jobs := e.enqueueFlow(
		readpast.FlowJob{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Queue: "rel"}},
		readpast.FlowJob{Ref: "render", Job: readpast.EnqueueParams{Kind: "render", Queue: "rel"},
			After: []readpast.After{{Ref: "extract", Policy: readpast.RunAnyway}}},
		readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "email", Queue: "rel"},
			After: []readpast.After{{Ref: "render", Policy: readpast.HoldChild}, {Ref: "extract"}}},
	)
	a, b, c := jobs[0], jobs[1], jobs[2]
	finish(t, e.store, "rel", a.ID, false)

	p := e.do(req{path: "/jobs/" + strconv.FormatInt(b.ID, 10)})
	if p.status != http.StatusOK {
		t.Fatalf("job page: %d\n%s", p.status, p.body)
	}
	parents, children := section(t, p.body, "parents"), section(t, p.body, "children")
	for _, want := range []string{
		fmt.Sprintf(`<tr id="parents-%d"><td><a href="/jobs/%d">%d</a></td><td class="name">extract</td>`, a.ID, a.ID, a.ID),
		`<span class="state succeeded">succeeded</span>`,
		`<span class="policy run_anyway">run_anyway</span>`, `<span class="edge-state done">done</span>`,
	} {
		if !strings.Contains(parents, want) {
			t.Errorf("the parents of job %d lack %s:\n%s", b.ID, want, parents)
		}
	}
	for _, want := range []string{
		fmt.Sprintf(`<tr id="children-%d"><td><a href="/jobs/%d">%d</a></td><td class="name">—</td><td class="name">email</td>`, c.ID, c.ID, c.ID),
		`<span class="state blocked">blocked</span>`,
		`<span class="policy hold_child">hold_child</span>`, `<span class="edge-state open">open</span>`,
	} {
		if !strings.Contains(children, want) {
			t.Errorf("the children of job %d lack %s:\n%s", b.ID, want, children)
		}
	}
	if strings.Count(parents, "<tr id=") != 1 || strings.Count(children, "<tr id=") != 1 {
		t.Errorf("job %d: %d parents and %d children listed, want 1 and 1", b.ID, strings.Count(parents, "<tr id="), strings.Count(children, "<tr id="))
	}
	if want := fmt.Sprintf(`<a href="/jobs/%d/flow" id="flow-link">`, b.ID); !strings.Contains(p.body, want) {
		t.Errorf("the job page does not link to its flow (%s)", want)
	}
	// The first job of the flow has children only.
	p = e.do(req{path: "/jobs/" + strconv.FormatInt(a.ID, 10)})
	if strings.Contains(p.body, `id="parents"`) || strings.Count(section(t, p.body, "children"), "<tr id=") != 2 {
		t.Errorf("job %d: want no parents and 2 children:\n%s", a.ID, p.body)
	}

	// A job outside flows: nothing about flows.
	lone, err := e.store.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "lone", Queue: "rel"}})
	if err != nil {
		t.Fatal(err)
	}
	p = e.do(req{path: "/jobs/" + strconv.FormatInt(lone[0].ID, 10)})
	if p.status != http.StatusOK || strings.Contains(p.body, `id="flow"`) || strings.Contains(p.body, "/flow") {
		t.Errorf("a job outside flows shows flow parts: %d\n%s", p.status, p.body)
	}

	// A fan-out of relativesShown+2 children: relativesShown listed, and a note.
	fan := []readpast.FlowJob{{Ref: "top", Job: readpast.EnqueueParams{Kind: "top", Queue: "fan"}}}
	for range relativesShown + 2 {
		fan = append(fan, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "leaf", Queue: "fan"}, After: []readpast.After{{Ref: "top"}}})
	}
	top := e.enqueueFlow(fan...)[0]
	p = e.do(req{path: "/jobs/" + strconv.FormatInt(top.ID, 10)})
	children = section(t, p.body, "children")
	if n := strings.Count(children, "<tr id="); n != relativesShown || !strings.Contains(p.body, fmt.Sprintf("Only the first %d are listed", relativesShown)) ||
		!strings.Contains(p.body, fmt.Sprintf("(%d+)", relativesShown)) {
		t.Errorf("a job of %d children lists %d:\n%s", relativesShown+2, n, p.body)
	}
}

// section returns the table with the given id in a page, or "" if none.
func section(t *testing.T, body, id string) string {
	t.Helper()
	start := strings.Index(body, `<table class="relatives" id="`+id+`"`)
	if start < 0 {
		return ""
	}
	end := strings.Index(body[start:], "</table>")
	if end < 0 {
		t.Fatalf("table %s does not end", id)
	}
	return body[start : start+end]
}

var (
	nodeRe = regexp.MustCompile(`<a href="/jobs/(\d+)" id="node-(\d+)" class="node (\w+)( current)?" data-layer="(\d+)"[^>]*>\s*<title>[^<]*</title>\s*<rect x="(\d+)" y="(\d+)"`)
	lineRe = regexp.MustCompile(`<line class="edge (\w+) (\w+)" x1="\d+" y1="(\d+)" x2="\d+" y2="(\d+)" marker-end="url\(#arrow-(\w+)\)" data-parent="(\d+)" data-child="(\d+)">`)
)

// drawn is a job's box on the flow page.
type drawn struct {
	state       string
	current     bool
	layer, x, y int
}

// drawnLine is an edge on the flow page.
type drawnLine struct {
	policy, state string
	y1, y2        int
}

// parseFlow reads the boxes and arrows of a flow page.
func parseFlow(t *testing.T, body string) (map[int64]drawn, map[[2]int64]drawnLine) {
	t.Helper()
	nodes := map[int64]drawn{}
	for _, m := range nodeRe.FindAllStringSubmatch(body, -1) {
		if m[1] != m[2] {
			t.Errorf("box %s links to job %s", m[2], m[1])
		}
		id, _ := strconv.ParseInt(m[1], 10, 64)
		layer, _ := strconv.Atoi(m[5])
		x, _ := strconv.Atoi(m[6])
		y, _ := strconv.Atoi(m[7])
		nodes[id] = drawn{state: m[3], current: m[4] != "", layer: layer, x: x, y: y}
	}
	lines := map[[2]int64]drawnLine{}
	for _, m := range lineRe.FindAllStringSubmatch(body, -1) {
		if m[2] != m[5] {
			t.Errorf("an edge in state %s has the arrowhead of %s", m[2], m[5])
		}
		p, _ := strconv.ParseInt(m[6], 10, 64)
		c, _ := strconv.ParseInt(m[7], 10, 64)
		y1, _ := strconv.Atoi(m[3])
		y2, _ := strconv.Atoi(m[4])
		lines[[2]int64{p, c}] = drawnLine{policy: m[1], state: m[2], y1: y1, y2: y2}
	}
	return nodes, lines
}

// TestFlowPage: the flow page draws every job connected to the job, each
// a link to its page, coloured by its state, in layers (parents above
// children), and each edge as an arrow marked by its policy and state;
// the drawing follows the jobs as they run. A job outside flows gets a
// note, an unknown job a 404, and a flow past flowCap jobs is cut, with a
// note. The page holds no inline style or script (the CSP forbids them).
func TestFlowPage(t *testing.T) {
	e := newEnv(t, true)
	jobs := e.enqueueFlow(
		readpast.FlowJob{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Queue: "fp"}},
		readpast.FlowJob{Ref: "render", Job: readpast.EnqueueParams{Kind: "render", Queue: "fp"},
			After: []readpast.After{{Ref: "extract", Policy: readpast.HoldChild}}},
		readpast.FlowJob{Ref: "<b>mail</b>", Job: readpast.EnqueueParams{Kind: "email", Queue: "fp"},
			After: []readpast.After{{Ref: "render", Policy: readpast.RunAnyway}, {Ref: "extract"}}},
	)
	a, b, c := jobs[0], jobs[1], jobs[2]
	flowOf := func(id int64) resp {
		t.Helper()
		return e.do(req{path: fmt.Sprintf("/jobs/%d/flow", id), token: readToken})
	}

	p := flowOf(c.ID)
	if p.status != http.StatusOK || p.header.Get("Content-Security-Policy") == "" {
		t.Fatalf("flow page: %d\n%s", p.status, p.body)
	}
	nodes, lines := parseFlow(t, p.body)
	if len(nodes) != 3 || len(lines) != 3 {
		t.Fatalf("%d boxes and %d arrows, want 3 and 3:\n%s", len(nodes), len(lines), p.body)
	}
	for id, want := range map[int64]drawn{a.ID: {state: "pending", layer: 0}, b.ID: {state: "blocked", layer: 1}, c.ID: {state: "blocked", layer: 2, current: true}} {
		got := nodes[id]
		if got.state != want.state || got.layer != want.layer || got.current != want.current {
			t.Errorf("job %d drawn %+v, want %+v", id, got, want)
		}
	}
	if !(nodes[a.ID].y < nodes[b.ID].y && nodes[b.ID].y < nodes[c.ID].y) {
		t.Errorf("parents are not above children: %+v", nodes)
	}
	for k, want := range map[[2]int64]drawnLine{
		{a.ID, b.ID}: {policy: "hold_child", state: "open"},
		{b.ID, c.ID}: {policy: "run_anyway", state: "open"},
		{a.ID, c.ID}: {policy: "cancel_child", state: "open"},
	} {
		got := lines[k]
		if got.policy != want.policy || got.state != want.state || got.y1 != nodes[k[0]].y+nodeH || got.y2 >= nodes[k[1]].y {
			t.Errorf("edge %v drawn %+v, want %+v from the parent's box down to the child's", k, got, want)
		}
	}
	for _, want := range []string{
		`<text class="label" x="`, ">extract</text>", "&lt;b&gt;mail&lt;/b&gt;</text>",
		fmt.Sprintf(`<h1>Flow of <a href="/jobs/%d">job %d</a>`, c.ID, c.ID),
		`<marker id="arrow-held"`, `<details class="data" id="flow-edges">`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the flow page lacks %s", want)
		}
	}
	if strings.Contains(p.body, "<b>mail") || strings.Contains(p.body, " style=") || strings.Contains(p.body, "<style") ||
		strings.Count(p.body, "<script") != 1 || strings.Contains(p.body, "flow-truncated") {
		t.Errorf("the flow page has unescaped text, inline style or script, or a truncation note:\n%s", p.body)
	}
	// Every job's flow is the same graph.
	if n, l := parseFlow(t, flowOf(a.ID).body); len(n) != 3 || len(l) != 3 || !n[a.ID].current {
		t.Errorf("the flow of job %d: %d boxes, %d arrows", a.ID, len(n), len(l))
	}

	// The parent fails: its hold_child edge is held, its cancel_child
	// edge cancels the child.
	finish(t, e.store, "fp", a.ID, true)
	nodes, lines = parseFlow(t, flowOf(b.ID).body)
	if nodes[a.ID].state != "failed" || nodes[b.ID].state != "blocked" || nodes[c.ID].state != "cancelled" ||
		lines[[2]int64{a.ID, b.ID}].state != "held" || lines[[2]int64{a.ID, c.ID}].state != "done" {
		t.Errorf("after the parent failed: %+v %+v", nodes, lines)
	}
	if !strings.Contains(flowOf(b.ID).body, `<span class="state failed">failed</span> 1`) {
		t.Error("the flow page does not count its jobs by state")
	}

	// Outside flows, unknown, malformed.
	lone, err := e.store.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "lone", Queue: "fp"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := flowOf(lone[0].ID); p.status != http.StatusOK || !strings.Contains(p.body, `id="flow-none"`) || strings.Contains(p.body, "<svg class=\"flow\"") {
		t.Errorf("the flow page of a job outside flows: %d\n%s", p.status, p.body)
	}
	for _, path := range []string{"/jobs/987654/flow", "/jobs/0/flow", "/jobs/x/flow", "/jobs/-1/flow"} {
		if p := e.do(req{path: path, token: readToken}); p.status != http.StatusNotFound || !strings.Contains(p.body, "no such job") {
			t.Errorf("%s: %d", path, p.status)
		}
	}
	// Logged out: the login page, as for every page.
	if p := e.do(req{path: fmt.Sprintf("/jobs/%d/flow", c.ID)}); p.status == http.StatusOK {
		t.Errorf("the flow page answered without a login: %d", p.status)
	}

	// Past flowCap jobs: the nearest flowCap drawn, and a note.
	fan := []readpast.FlowJob{{Ref: "top", Job: readpast.EnqueueParams{Kind: "top", Queue: "wide"}}}
	for range flowCap + 5 {
		fan = append(fan, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "leaf", Queue: "wide"}, After: []readpast.After{{Ref: "top"}}})
	}
	top := e.enqueueFlow(fan...)[0]
	p = flowOf(top.ID)
	nodes, lines = parseFlow(t, p.body)
	if len(nodes) != flowCap || len(lines) != flowCap-1 || !nodes[top.ID].current || !strings.Contains(p.body, `id="flow-truncated"`) {
		t.Errorf("a flow of %d jobs: %d boxes, %d arrows, truncation note %v", flowCap+6, len(nodes), len(lines), strings.Contains(p.body, "flow-truncated"))
	}
}
