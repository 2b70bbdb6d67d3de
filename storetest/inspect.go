package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testInspect: the dashboard's reads (readpast.Inspector) count what the
// live table holds and what finished since a time, minute by minute, and
// search pages through every match exactly once, however small the scan
// budget.
func testInspect(t *testing.T, h Harness) {
	t.Run("QueueSummaries", func(t *testing.T) { testQueueSummaries(t, h) })
	t.Run("Activity", func(t *testing.T) { testActivity(t, h) })
	t.Run("BusiestGroups", func(t *testing.T) { testBusiestGroups(t, h) })
	t.Run("Search", func(t *testing.T) { testSearch(t, h) })
}

// newInspector makes a store that must implement readpast.Inspector.
func newInspector(t *testing.T, h Harness) (readpast.Store, readpast.Inspector) {
	t.Helper()
	s := newStore(t, h)
	in, ok := s.(readpast.Inspector)
	if !ok {
		t.Fatalf("%T does not implement readpast.Inspector", s)
	}
	return s, in
}

func testQueueSummaries(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	start := time.Now()
	oldest := start.Add(-10 * time.Minute).Truncate(time.Microsecond)
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "qa", RunAt: oldest},
		readpast.EnqueueParams{Kind: "k", Queue: "qa"},
		readpast.EnqueueParams{Kind: "k", Queue: "qa", RunAt: start.Add(time.Hour)},
		readpast.EnqueueParams{Kind: "k", Queue: "qc"},
	)
	// qa: one running, one succeeded, one failed, one cancelled on top.
	for _, end := range []string{"run", "succeed", "fail", "cancel"} {
		j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qa", RunAt: start.Add(-time.Hour)})[0]
		if end == "cancel" {
			ok(s.Cancel(ctx, j.ID)).must(t)
			continue
		}
		c := claim(t, s, 1, time.Minute, "qa")
		if len(c) != 1 || c[0].ID != j.ID {
			t.Fatalf("claimed %v, want %d", ids(c), j.ID)
		}
		switch end {
		case "succeed":
			if err := completeOne(ctx, s, c[0], ""); err != nil {
				t.Fatal(err)
			}
		case "fail":
			if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: c[0].Token, Message: "x", Discard: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// qc: its only job finishes; qp: paused, without jobs.
	c := claim(t, s, 1, time.Minute, "qc")
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseQueue(ctx, "qp"); err != nil {
		t.Fatal(err)
	}

	got := ok(in.QueueSummaries(ctx, start.Add(-time.Minute))).must(t)
	if names := queueNames(got); !slices.Equal(names, []string{"qa", "qc", "qp"}) {
		t.Fatalf("queues %v, want [qa qc qp]", names)
	}
	qa, qc, qp := got[0], got[1], got[2]
	if qa.Pending != 2 || qa.Scheduled != 1 || qa.Running != 1 || qa.Succeeded != 1 || qa.Failed != 1 || qa.Cancelled != 1 || qa.Paused {
		t.Errorf("qa: %+v", qa)
	}
	if qa.OldestDue == nil || !qa.OldestDue.Equal(oldest) {
		t.Errorf("qa: oldest due %v, want %v", qa.OldestDue, oldest)
	}
	if qc.Pending != 0 || qc.Succeeded != 1 || qc.OldestDue != nil {
		t.Errorf("qc: %+v", qc)
	}
	if !qp.Paused || qp.PausedAt == nil || qp.PausedAt.Before(start.Add(-time.Minute)) || qp.Pending+qp.Succeeded != 0 {
		t.Errorf("qp: %+v", qp)
	}

	// Since later than every finish: qc has nothing left to show.
	got = ok(in.QueueSummaries(ctx, time.Now().Add(time.Hour))).must(t)
	if names := queueNames(got); !slices.Equal(names, []string{"qa", "qp"}) {
		t.Fatalf("queues since an hour ahead: %v, want [qa qp]", names)
	}
	if qa := got[0]; qa.Succeeded+qa.Failed+qa.Cancelled != 0 || qa.Pending != 2 || qa.Running != 1 {
		t.Errorf("qa since an hour ahead: %+v", qa)
	}
}

func queueNames(qs []readpast.QueueSummary) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.Name)
	}
	return out
}

func testActivity(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	since := time.Now().Add(-time.Minute)
	const wait = 300 * time.Millisecond
	// A job that waits at least 300 ms after it was enqueued, then succeeds.
	slow := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a"})[0]
	time.Sleep(wait)
	c := claim(t, s, 1, time.Minute, "a")
	if len(c) != 1 || c[0].ID != slow.ID {
		t.Fatalf("claimed %v, want %d", ids(c), slow.ID)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	// One that fails for good, one cancelled before it starts, one running.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a"})
	c = claim(t, s, 1, time.Minute, "a")
	if err := failOne(ctx, s, readpast.Failure{ID: c[0].ID, Token: c[0].Token, Message: "x", Discard: true}); err != nil {
		t.Fatal(err)
	}
	ok(s.Cancel(ctx, enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a"})[0].ID)).must(t)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a"})
	claim(t, s, 1, time.Minute, "a")

	minutes := ok(in.Activity(ctx, since)).must(t)
	var sum readpast.ActivityMinute
	var p99 time.Duration
	for i, m := range minutes {
		if m.Minute.Truncate(time.Minute) != m.Minute || m.Minute.Location() != time.UTC {
			t.Errorf("minute %v is not the start of a UTC minute", m.Minute)
		}
		if i > 0 && !minutes[i-1].Minute.Before(m.Minute) {
			t.Errorf("minutes out of order: %v then %v", minutes[i-1].Minute, m.Minute)
		}
		if m.Minute.Before(since.Truncate(time.Minute)) {
			t.Errorf("minute %v is before %v", m.Minute, since)
		}
		if m.LatencyP50 > m.LatencyP99 || m.LatencyP50 < 0 || (m.Started == 0 && m.LatencyP99 != 0) {
			t.Errorf("minute %v: p50 %v, p99 %v with %d started", m.Minute, m.LatencyP50, m.LatencyP99, m.Started)
		}
		sum.Succeeded += m.Succeeded
		sum.Failed += m.Failed
		sum.Cancelled += m.Cancelled
		sum.Started += m.Started
		p99 = max(p99, m.LatencyP99)
	}
	if sum.Succeeded != 1 || sum.Failed != 1 || sum.Cancelled != 1 || sum.Started != 3 {
		t.Errorf("activity totals %+v, want 1 succeeded, 1 failed, 1 cancelled, 3 started", sum)
	}
	// The slow job's wait is the largest of at most three in its minute,
	// so the minute's p99 is at least 98% of it.
	if p99 < wait*98/100 || p99 > time.Minute {
		t.Errorf("largest p99 %v: a job waited %v", p99, wait)
	}
	if later := ok(in.Activity(ctx, time.Now().Add(2*time.Minute))).must(t); len(later) != 0 {
		t.Errorf("activity since two minutes ahead: %+v", later)
	}
}

func testBusiestGroups(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "g2", 2); err != nil {
		t.Fatal(err)
	}
	// g2's jobs come first in claim order.
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g2", Priority: -1},
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g2", Priority: -1},
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "q", Group: "g3"},
		readpast.EnqueueParams{Kind: "k", Queue: "q"},
		// A job with several keys counts under each of them.
		readpast.EnqueueParams{Kind: "k", Queue: "q", Keys: []string{"g3", "g1"}},
	)
	if c := claim(t, s, 1, time.Minute, "q"); len(c) != 1 || c[0].Group == nil || *c[0].Group != "g2" {
		t.Fatalf("claimed %+v, want a job of g2", c)
	}
	got := ok(in.BusiestGroups(ctx, 2)).must(t)
	want := []readpast.GroupLoad{{Group: "g1", Pending: 4, Limit: 1}, {Group: "g2", Running: 1, Pending: 1, Limit: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("busiest groups %+v, want %+v", got, want)
	}
	if got := ok(in.BusiestGroups(ctx, 10)).must(t); len(got) != 3 || got[2] != (readpast.GroupLoad{Group: "g3", Pending: 2, Limit: 1}) {
		t.Fatalf("all groups %+v", got)
	}
	if _, err := in.BusiestGroups(ctx, 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
}

func testSearch(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	// 30 jobs in two queues and three kinds; every fourth is grouped, every
	// fifth has the needle in its payload, every third is tagged "red"
	// (and every sixth "blue" too). Some end up running, succeeded,
	// failed (with the needle in the message or stack) or cancelled.
	var all []*readpast.Job
	for i := range 30 {
		p := readpast.EnqueueParams{Kind: fmt.Sprintf("k%d", i%3), Queue: []string{"qa", "qb"}[i%2],
			Payload: []byte(fmt.Sprintf(`{"n":%d,"note":"hay"}`, i))}
		if i%5 == 0 {
			p.Payload = []byte(fmt.Sprintf(`{"n":%d,"note":"Needle-%d"}`, i, i))
		}
		if i%4 == 0 {
			p.Group = "grp"
		}
		if i%3 == 0 {
			p.Tags = []string{"red"}
		}
		if i%6 == 0 {
			p.Tags = append(p.Tags, "blue")
		}
		all = append(all, enqueue(t, s, p)...)
	}
	finish := func(id int64, how string) {
		t.Helper()
		if how == "cancel" {
			ok(s.Cancel(ctx, id)).must(t)
			return
		}
		ok(s.Retry(ctx, id)).must(t) // run now, so that the claim below takes it
		var j *readpast.Job
		for _, c := range claim(t, s, 1000, time.Minute, "qa", "qb") {
			if c.ID == id {
				j = c
				continue
			}
			if err := s.Release(ctx, c.ID, c.Token); err != nil {
				t.Fatal(err)
			}
		}
		if j == nil {
			t.Fatalf("job %d not claimed", id)
		}
		switch how {
		case "succeed":
			if err := completeOne(ctx, s, j, `{"ok":true}`); err != nil {
				t.Fatal(err)
			}
		case "fail message":
			if err := failOne(ctx, s, readpast.Failure{ID: id, Token: j.Token, Message: "boom: NEEDLE in the message", Discard: true}); err != nil {
				t.Fatal(err)
			}
		case "fail stack":
			if err := failOne(ctx, s, readpast.Failure{ID: id, Token: j.Token, Message: "panic", Stack: "goroutine 1:\nneedle.go:12", Discard: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	finish(all[1].ID, "succeed")
	finish(all[2].ID, "succeed")
	finish(all[3].ID, "fail message")
	finish(all[7].ID, "fail stack")
	finish(all[8].ID, "cancel")
	finish(all[11].ID, "run")
	finish(all[29].ID, "succeed")
	// A blocked job, behind a job of its flow, where the store keeps flows.
	if fs, ok := s.(readpast.FlowStore); ok {
		flow, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{
			{Ref: "parent", Job: readpast.EnqueueParams{Kind: "k0", Queue: "qb", RunAt: time.Now().Add(time.Hour)}},
			{Job: readpast.EnqueueParams{Kind: "k1", Queue: "qa", Payload: json.RawMessage(`{"needle":"blocked"}`)},
				After: []readpast.After{{Ref: "parent"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, flow...)
	}
	for i := range all {
		all[i] = get(t, s, all[i].ID)
	}

	// search pages through p with the given budget and returns every job
	// found, checking the pages on the way.
	search := func(p readpast.SearchParams) []int64 {
		t.Helper()
		var found []int64
		for calls := 0; ; calls++ {
			if calls > 100 {
				t.Fatalf("search %+v: no end after 100 pages", p)
			}
			res := ok(in.Search(ctx, p)).must(t)
			if len(res.Jobs) > max(p.Limit, 1) && p.Limit > 0 {
				t.Fatalf("search %+v: %d jobs on a page of %d", p, len(res.Jobs), p.Limit)
			}
			if res.Partial && res.Next == "" {
				t.Fatalf("search %+v: partial without a cursor", p)
			}
			for _, j := range res.Jobs {
				if len(found) > 0 && j.ID >= found[len(found)-1] {
					t.Fatalf("search %+v: job %d after %d", p, j.ID, found[len(found)-1])
				}
				found = append(found, j.ID)
			}
			if res.Next == "" {
				return found
			}
			p.Cursor = res.Next
		}
	}
	want := func(match func(j *readpast.Job) bool) []int64 {
		var out []int64
		for i := len(all) - 1; i >= 0; i-- {
			if match(all[i]) {
				out = append(out, all[i].ID)
			}
		}
		return out
	}
	hasText := func(j *readpast.Job, text string) bool {
		hay := strings.ToLower(string(j.Payload))
		for _, e := range j.Errors {
			hay += "\n" + strings.ToLower(e.Message+"\n"+e.Stack)
		}
		return strings.Contains(hay, strings.ToLower(text))
	}
	cases := []struct {
		name  string
		p     readpast.SearchParams
		match func(j *readpast.Job) bool
	}{
		{"all", readpast.SearchParams{}, func(*readpast.Job) bool { return true }},
		{"queue", readpast.SearchParams{ListParams: readpast.ListParams{Queue: "qb"}}, func(j *readpast.Job) bool { return j.Queue == "qb" }},
		{"kind", readpast.SearchParams{ListParams: readpast.ListParams{Kind: "k1"}}, func(j *readpast.Job) bool { return j.Kind == "k1" }},
		{"group", readpast.SearchParams{ListParams: readpast.ListParams{Group: "grp"}}, func(j *readpast.Job) bool { return j.Group != nil && *j.Group == "grp" }},
		{"tag", readpast.SearchParams{ListParams: readpast.ListParams{Tag: "blue"}}, func(j *readpast.Job) bool { return slices.Contains(j.Tags, "blue") }},
		{"tag and queue", readpast.SearchParams{ListParams: readpast.ListParams{Tag: "red", Queue: "qa"}},
			func(j *readpast.Job) bool { return j.Queue == "qa" && slices.Contains(j.Tags, "red") }},
		{"text in payload or errors", readpast.SearchParams{Text: "needle"}, func(j *readpast.Job) bool { return hasText(j, "needle") }},
		{"text ignoring case", readpast.SearchParams{Text: "NEEDLE-2"}, func(j *readpast.Job) bool { return hasText(j, "needle-2") }},
		{"text and kind", readpast.SearchParams{ListParams: readpast.ListParams{Kind: "k0"}, Text: "needle"},
			func(j *readpast.Job) bool { return j.Kind == "k0" && hasText(j, "needle") }},
		{"nothing", readpast.SearchParams{Text: "absent"}, func(*readpast.Job) bool { return false }},
	}
	for _, st := range readpast.AllStates {
		if _, ok := s.(readpast.FlowStore); st == readpast.StateBlocked && !ok {
			continue // a store without flows has no blocked jobs
		}
		cases = append(cases, struct {
			name  string
			p     readpast.SearchParams
			match func(j *readpast.Job) bool
		}{"state " + string(st), readpast.SearchParams{ListParams: readpast.ListParams{State: st}}, func(j *readpast.Job) bool { return j.State == st }})
	}
	for _, tc := range cases {
		w := want(tc.match)
		if tc.name != "nothing" && len(w) == 0 {
			t.Fatalf("%s: the test data has no match", tc.name)
		}
		// Whole pages, small pages, and budgets too small for one page.
		for _, shape := range [][2]int{{0, 0}, {4, 0}, {4, 3}, {1, 1}} {
			p := tc.p
			p.Limit, p.Scan = shape[0], shape[1]
			if got := search(p); !slices.Equal(got, w) {
				t.Errorf("%s, limit %d, scan %d: found %v, want %v", tc.name, p.Limit, p.Scan, got, w)
			}
		}
	}

	// A budget smaller than the jobs to look through stops short and says
	// where to go on.
	res := ok(in.Search(ctx, readpast.SearchParams{ListParams: readpast.ListParams{Kind: "k2", Limit: 10}, Scan: 2})).must(t)
	if !res.Partial || res.Next == "" || len(res.Jobs) > 1 {
		t.Errorf("scan 2: %d jobs, partial %v, next %q", len(res.Jobs), res.Partial, res.Next)
	}
	// Reaching the oldest job ends it.
	res = ok(in.Search(ctx, readpast.SearchParams{ListParams: readpast.ListParams{Limit: 100}})).must(t)
	if res.Partial || res.Next != "" || len(res.Jobs) != len(all) {
		t.Errorf("whole search: %d jobs, partial %v, next %q", len(res.Jobs), res.Partial, res.Next)
	}

	for _, p := range []readpast.SearchParams{
		{Text: strings.Repeat("x", readpast.MaxSearchText+1)},
		{Text: "a\x00b"},
		{Text: "\xff"},
		{ListParams: readpast.ListParams{State: "bogus"}},
		{ListParams: readpast.ListParams{Cursor: "x"}},
		{Scan: -1},
		{Scan: readpast.MaxSearchScan + 1},
	} {
		if _, err := in.Search(ctx, p); !errors.Is(err, readpast.ErrInvalid) {
			t.Errorf("search %+v: %v, want ErrInvalid", p, err)
		}
	}
}
