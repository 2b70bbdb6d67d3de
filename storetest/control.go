package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// listAll lists every job p matches, page by page, and returns their ids.
func listAll(t *testing.T, s readpast.Store, p readpast.ListParams) []int64 {
	t.Helper()
	var out []int64
	seen := map[int64]bool{}
	for {
		res := ok(s.List(ctxT(t), p)).must(t)
		for _, j := range res.Jobs {
			if seen[j.ID] {
				t.Fatalf("listing %+v: job %d on two pages", p, j.ID)
			}
			seen[j.ID] = true
			out = append(out, j.ID)
		}
		if res.Next == "" {
			return out
		}
		p.Cursor = res.Next
	}
}

func tagRows(t *testing.T, h Harness, s readpast.Store) int64 {
	t.Helper()
	return ok(h.TagRows(ctxT(t), s)).must(t)
}

// testTags: tags are kept as given (each once), returned by every read,
// follow the job to history and back, filter listings (across pages and
// with the other filters), and go with the job when it is deleted.
func testTags(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	js := enqueue(t, s,
		readpast.EnqueueParams{Kind: "a", Tags: []string{"red", "big", "red"}},
		readpast.EnqueueParams{Kind: "b", Tags: []string{"red"}},
		readpast.EnqueueParams{Kind: "a"},
		readpast.EnqueueParams{Kind: "a", Queue: "other", Tags: []string{"big"}},
	)
	if !slices.Equal(js[0].Tags, []string{"red", "big"}) || !slices.Equal(js[1].Tags, []string{"red"}) || len(js[2].Tags) != 0 || js[2].Tags == nil {
		t.Fatalf("enqueue returned tags %q %q %#v", js[0].Tags, js[1].Tags, js[2].Tags)
	}
	if g := get(t, s, js[0].ID); !slices.Equal(g.Tags, []string{"red", "big"}) {
		t.Fatalf("get: tags %q", g.Tags)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "red"}); !slices.Equal(got, []int64{js[1].ID, js[0].ID}) {
		t.Fatalf("list tag red: %v", got)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "big", Queue: "other"}); !slices.Equal(got, []int64{js[3].ID}) {
		t.Fatalf("list tag big in queue other: %v", got)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "big", Limit: 1}); !slices.Equal(got, []int64{js[3].ID, js[0].ID}) {
		t.Fatalf("list tag big page by page: %v", got)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "none"}); len(got) != 0 {
		t.Fatalf("list unknown tag: %v", got)
	}
	// Claimed, then finished: the tags come along.
	cs := claim(t, s, 10, time.Minute)
	for _, c := range cs {
		if c.ID == js[0].ID && !slices.Equal(c.Tags, []string{"red", "big"}) {
			t.Fatalf("claim: tags %q", c.Tags)
		}
		if c.ID == js[0].ID {
			if err := completeOne(ctx, s, c, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "red", State: readpast.StateSucceeded}); !slices.Equal(got, []int64{js[0].ID}) {
		t.Fatalf("list succeeded tagged red: %v", got)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "red", State: readpast.StateRunning}); !slices.Equal(got, []int64{js[1].ID}) {
		t.Fatalf("list running tagged red: %v", got)
	}
	if g := wantState(t, s, js[0].ID, readpast.StateSucceeded); !slices.Equal(g.Tags, []string{"red", "big"}) {
		t.Fatalf("finished job: tags %q", g.Tags)
	}
	if c, err := s.Cancel(ctx, js[1].ID); err != nil || !slices.Equal(c.Tags, []string{"red"}) {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if r, err := s.Retry(ctx, js[1].ID); err != nil || !slices.Equal(r.Tags, []string{"red"}) {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if n := tagRows(t, h, s); n != 4 {
		t.Fatalf("%d tag rows, want 4", n)
	}
	// Retention deletes the finished job and its tag rows.
	n := ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(time.Hour)})).must(t)
	if n != 1 {
		t.Fatalf("pruned %d", n)
	}
	if n := tagRows(t, h, s); n != 2 {
		t.Fatalf("%d tag rows after prune, want 2", n)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "red"}); !slices.Equal(got, []int64{js[1].ID}) {
		t.Fatalf("list tag red after prune: %v", got)
	}
}

// testTagsInvalid: too many tags, or a bad one, fail the whole batch with
// a FieldError naming tags, and store nothing.
func testTagsInvalid(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	many := make([]string, readpast.MaxTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, tags := range [][]string{many, {"ok", "has space"}, {""}, {strings.Repeat("x", readpast.MaxNameLen+1)}, {"bell\a"}} {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Tags: []string{"fine"}}, {Kind: "k", Tags: tags}})
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || fe.Field != "tags" {
			t.Fatalf("tags %q: %v, want a FieldError for tags", tags, err)
		}
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Tags: many[:readpast.MaxTags]}}); err != nil {
		t.Fatalf("%d tags: %v", readpast.MaxTags, err)
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "fine"}); len(got) != 0 {
		t.Fatalf("a refused batch left jobs: %v", got)
	}
	if n := tagRows(t, h, s); n != readpast.MaxTags {
		t.Fatalf("%d tag rows, want %d", n, readpast.MaxTags)
	}
	if _, err := s.List(ctx, readpast.ListParams{Tag: "a b"}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("list with a bad tag: %v", err)
	}
}

// testSnooze: a snoozed job is pending at now+d with its attempt not
// counted, not claimable before then; a stale or malformed token, or an
// unknown id, changes nothing.
func testSnooze(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	c := claim(t, s, 1, time.Minute)[0]
	before := time.Now()
	if err := s.Snooze(ctx, c.ID, c.Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, s, j.ID, readpast.StatePending)
	if p.Attempt != 0 || p.Snoozes != 1 || p.LeaseExpiresAt != nil {
		t.Fatalf("snoozed job: attempt %d, snoozes %d, lease %v", p.Attempt, p.Snoozes, p.LeaseExpiresAt)
	}
	if d := p.RunAt.Sub(before); d < time.Hour-5*time.Second || d > time.Hour+5*time.Second {
		t.Fatalf("run_at %s after the snooze, want about an hour", d)
	}
	if got := claim(t, s, 1, time.Minute); len(got) != 0 {
		t.Fatalf("snoozed job claimed early: %+v", got)
	}
	for _, tok := range []string{c.Token, "not-a-token", "00000000-0000-0000-0000-000000000000"} {
		if err := s.Snooze(ctx, c.ID, tok, 0); !errors.Is(err, readpast.ErrStaleToken) {
			t.Fatalf("snooze with token %q: %v, want ErrStaleToken", tok, err)
		}
	}
	if err := s.Snooze(ctx, 987654, c.Token, 0); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("snooze unknown job: %v", err)
	}
	if g := get(t, s, j.ID); g.Snoozes != 1 || g.State != readpast.StatePending || !g.RunAt.Equal(p.RunAt) {
		t.Fatalf("a refused snooze changed the job: %+v", g)
	}
	// A zero snooze makes it claimable at once, the attempt still uncounted.
	k := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "now"})[0]
	kc := claim(t, s, 1, time.Minute, "now")[0]
	if err := s.Snooze(ctx, kc.ID, kc.Token, 0); err != nil {
		t.Fatal(err)
	}
	again := claim(t, s, 1, time.Minute, "now")
	if len(again) != 1 || again[0].ID != k.ID || again[0].Attempt != 1 || again[0].Snoozes != 1 {
		t.Fatalf("after a zero snooze: %+v", again)
	}
	if err := s.Snooze(ctx, again[0].ID, again[0].Token, -time.Second); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("negative snooze: %v", err)
	}
	if err := s.Snooze(ctx, again[0].ID, again[0].Token, readpast.MaxSnooze+time.Second); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("snooze past MaxSnooze: %v", err)
	}
	wantState(t, s, k.ID, readpast.StateRunning)
}

// testSnoozeGroup: snoozing a grouped job frees its slot at once.
func testSnoozeGroup(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	js := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "sg"}, readpast.EnqueueParams{Kind: "k", Group: "sg"})
	c := claim(t, s, 2, time.Minute)
	if len(c) != 1 || c[0].ID != js[0].ID {
		t.Fatalf("claimed %v, want only the group's head", ids(c))
	}
	if err := s.Snooze(ctx, c[0].ID, c[0].Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	next := claim(t, s, 2, time.Minute)
	if len(next) != 1 || next[0].ID != js[1].ID {
		t.Fatalf("after snoozing the head: claimed %v, want %d (its slot freed)", ids(next), js[1].ID)
	}
	// The snoozed job's place waits for its time: it is not claimable.
	if err := completeOne(ctx, s, next[0], ""); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, 2, time.Minute); len(got) != 0 {
		t.Fatalf("snoozed job claimed early: %v", ids(got))
	}
}

// testSnoozeCount: every snooze counts, and a manual retry resets the
// count with the attempts. The limit on snoozes is the caller's; the
// count is what it decides on.
func testSnoozeCount(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	for i := 1; i <= 3; i++ {
		c := claim(t, s, 1, time.Minute)
		if len(c) != 1 || c[0].Snoozes != i-1 || c[0].Attempt != 1 {
			t.Fatalf("claim %d: %+v", i, c)
		}
		if err := s.Snooze(ctx, c[0].ID, c[0].Token, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := claim(t, s, 1, time.Minute)[0]
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "x", Discard: true}); err != nil {
		t.Fatal(err)
	}
	if g := wantState(t, s, j.ID, readpast.StateFailed); g.Snoozes != 3 {
		t.Fatalf("failed job: snoozes %d, want 3", g.Snoozes)
	}
	if r, err := s.Retry(ctx, j.ID); err != nil || r.Snoozes != 0 || r.Attempt != 0 {
		t.Fatalf("retry: %+v %v", r, err)
	}
}

// testBulkCancel: pending and running jobs matching the filter are
// cancelled (by queue, by tag, by kind and state); running ones' tokens
// stop being current, their group slots are freed and unique keys
// released; other jobs are untouched.
func testBulkCancel(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	js := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "bq", Group: "bg"},
		readpast.EnqueueParams{Kind: "k", Queue: "bq", Group: "bg"},
		readpast.EnqueueParams{Kind: "k", Queue: "bq", UniqueKey: "u1"},
		readpast.EnqueueParams{Kind: "k", Queue: "bq", RunAt: time.Now().Add(time.Hour)},
		readpast.EnqueueParams{Kind: "k", Queue: "keep", Tags: []string{"t"}},
		readpast.EnqueueParams{Kind: "k", Queue: "keep"},
	)
	running := claim(t, s, 10, time.Minute, "bq")
	if len(running) != 2 { // the group's head and the keyed job
		t.Fatalf("claimed %v", ids(running))
	}
	done := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "bq"})[0]
	dc := claim(t, s, 1, time.Minute, "bq")[0]
	if err := completeOne(ctx, s, dc, ""); err != nil || dc.ID != done.ID {
		t.Fatal(dc.ID, err)
	}
	n := ok(s.BulkCancel(ctx, readpast.JobFilter{Queue: "bq"})).must(t)
	if n != 4 {
		t.Fatalf("cancelled %d, want 4", n)
	}
	for _, j := range js[:4] {
		wantState(t, s, j.ID, readpast.StateCancelled)
	}
	wantState(t, s, done.ID, readpast.StateSucceeded)
	for _, c := range running {
		if err := completeOne(ctx, s, c, ""); !errors.Is(err, readpast.ErrStaleToken) {
			t.Fatalf("complete a bulk-cancelled job: %v", err)
		}
	}
	// The group's slot is free and the key released.
	g := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "bq", Group: "bg"})[0]
	if got := claim(t, s, 1, time.Minute, "bq"); len(got) != 1 || got[0].ID != g.ID {
		t.Fatalf("group slot not freed: claimed %v", ids(got))
	}
	if u := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "bq", UniqueKey: "u1"})[0]; u.Duplicate {
		t.Fatalf("unique key still held by %d", u.ID)
	}
	// By tag; by kind and state.
	if n := ok(s.BulkCancel(ctx, readpast.JobFilter{Tag: "t"})).must(t); n != 1 {
		t.Fatalf("cancelled %d by tag, want 1", n)
	}
	wantState(t, s, js[4].ID, readpast.StateCancelled)
	wantState(t, s, js[5].ID, readpast.StatePending)
	if n := ok(s.BulkCancel(ctx, readpast.JobFilter{Kind: "k", State: readpast.StateRunning})).must(t); n != 1 {
		t.Fatalf("cancelled %d running, want 1 (the group's new job)", n)
	}
	wantState(t, s, g.ID, readpast.StateCancelled)
	wantState(t, s, js[5].ID, readpast.StatePending)
	if n := ok(s.BulkCancel(ctx, readpast.JobFilter{Queue: "bq"})).must(t); n != 1 { // the new keyed job
		t.Fatalf("cancelled %d, want 1", n)
	}
	if n := ok(s.BulkCancel(ctx, readpast.JobFilter{Queue: "bq"})).must(t); n != 0 {
		t.Fatalf("cancelled %d again, want 0", n)
	}
}

// testBulkCancelMany: a bulk cancel over several batches takes every
// match, tagged or not, and nothing else.
func testBulkCancelMany(t *testing.T, h Harness) {
	s := newStore(t, h)
	// Longer than ctxT's two minutes: SQLite cancels each of these 4,246
	// jobs by statements of its own, which under -race take about 90 s
	// on an idle 2-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	n := 2*storekit.BulkBatch + 123
	ps := make([]readpast.EnqueueParams, 0, 2*n)
	for i := range 2 * n {
		p := readpast.EnqueueParams{Kind: "k", Queue: "many"}
		if i%2 == 1 {
			p.Queue, p.Tags = "tagged", []string{"x"}
		}
		ps = append(ps, p)
	}
	enqueue(t, s, ps...)
	claim(t, s, 500, time.Minute, "many")
	claim(t, s, 500, time.Minute, "tagged")
	if got := ok(s.BulkCancel(ctx, readpast.JobFilter{Queue: "many"})).must(t); got != n {
		t.Fatalf("cancelled %d, want %d", got, n)
	}
	if got := ok(s.BulkCancel(ctx, readpast.JobFilter{Tag: "x", State: readpast.StatePending})).must(t); got != n-500 {
		t.Fatalf("cancelled %d by tag, want %d", got, n-500)
	}
	st := ok(s.Queues(ctx)).must(t)
	for _, q := range st {
		want := map[readpast.JobState]int64{readpast.StateCancelled: int64(n)}
		if q.Name == "tagged" {
			want = map[readpast.JobState]int64{readpast.StateCancelled: int64(n - 500), readpast.StateRunning: 500}
		}
		if fmt.Sprint(q.Counts) != fmt.Sprint(want) {
			t.Fatalf("queue %s: %v, want %v", q.Name, q.Counts, want)
		}
	}
}

// testBulkRetry: failed and cancelled jobs matching the filter come back
// pending now with attempts reset; succeeded and live ones are untouched;
// a job whose unique key another job holds stays.
func testBulkRetry(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	js := enqueue(t, s,
		readpast.EnqueueParams{Kind: "r", MaxAttempts: 1, Tags: []string{"rt"}},
		readpast.EnqueueParams{Kind: "r", MaxAttempts: 1},
		readpast.EnqueueParams{Kind: "r"},
		readpast.EnqueueParams{Kind: "r", UniqueKey: "ru"},
		readpast.EnqueueParams{Kind: "other", MaxAttempts: 1},
	)
	cs := claim(t, s, 10, time.Minute)
	byID := map[int64]*readpast.Job{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	for _, j := range []*readpast.Job{js[0], js[4]} {
		if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: byID[j.ID].Token, Message: "boom"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := completeOne(ctx, s, byID[js[1].ID], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, js[3].ID); err != nil { // releases "ru"
		t.Fatal(err)
	}
	holder := enqueue(t, s, readpast.EnqueueParams{Kind: "r", UniqueKey: "ru", RunAt: time.Now().Add(time.Hour)})[0]
	if holder.Duplicate {
		t.Fatal("key not released by cancel")
	}
	if n := ok(s.BulkRetry(ctx, readpast.JobFilter{Kind: "r"})).must(t); n != 1 {
		t.Fatalf("retried %d, want 1 (the failed one; the cancelled one's key is held)", n)
	}
	r := wantState(t, s, js[0].ID, readpast.StatePending)
	if r.Attempt != 0 || len(r.Errors) != 1 || !slices.Equal(r.Tags, []string{"rt"}) {
		t.Fatalf("retried job: %+v", r)
	}
	wantState(t, s, js[1].ID, readpast.StateSucceeded)
	wantState(t, s, js[2].ID, readpast.StateRunning)
	wantState(t, s, js[3].ID, readpast.StateCancelled)
	wantState(t, s, js[4].ID, readpast.StateFailed)
	// Once the key is free, the cancelled job comes back (by state).
	if _, err := s.Cancel(ctx, holder.ID); err != nil {
		t.Fatal(err)
	}
	if n := ok(s.BulkRetry(ctx, readpast.JobFilter{Kind: "r", State: readpast.StateCancelled})).must(t); n != 1 {
		t.Fatalf("retried %d cancelled, want 1", n) // js[3] and the holder share a key: the oldest takes it
	}
	wantState(t, s, js[3].ID, readpast.StatePending)
	wantState(t, s, holder.ID, readpast.StateCancelled)
	if n := ok(s.BulkRetry(ctx, readpast.JobFilter{Tag: "rt"})).must(t); n != 0 {
		t.Fatalf("retried %d by tag, want 0 (already pending)", n)
	}
	if n := ok(s.BulkRetry(ctx, readpast.JobFilter{Queue: readpast.DefaultQueue, State: readpast.StateFailed})).must(t); n != 1 {
		t.Fatalf("retried %d failed, want 1", n)
	}
	wantState(t, s, js[4].ID, readpast.StatePending)
}

// testBulkDelete: finished jobs matching the filter are deleted with
// their tag rows and unique keys; live ones stay. Delete deletes one
// finished job.
func testBulkDelete(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	js := enqueue(t, s,
		readpast.EnqueueParams{Kind: "d", Tags: []string{"dt"}},
		readpast.EnqueueParams{Kind: "d", Tags: []string{"dt"}, UniqueKey: "dk", UniqueFor: time.Hour},
		readpast.EnqueueParams{Kind: "d", Tags: []string{"dt"}},
		readpast.EnqueueParams{Kind: "d", Queue: "live", Tags: []string{"dt"}},
	)
	cs := claim(t, s, 3, time.Minute)
	for _, c := range cs[:2] {
		if err := completeOne(ctx, s, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, cs[2].ID); err != nil {
		t.Fatal(err)
	}
	if dup := enqueue(t, s, readpast.EnqueueParams{Kind: "d", UniqueKey: "dk"})[0]; !dup.Duplicate {
		t.Fatal("key with a period not held after success")
	}
	if n := ok(s.BulkDelete(ctx, readpast.JobFilter{Tag: "dt", State: readpast.StateSucceeded})).must(t); n != 2 {
		t.Fatalf("deleted %d, want 2", n)
	}
	for _, j := range js[:2] {
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, readpast.ErrNotFound) {
			t.Fatalf("job %d after delete: %v", j.ID, err)
		}
	}
	if dup := enqueue(t, s, readpast.EnqueueParams{Kind: "d", UniqueKey: "dk"})[0]; dup.Duplicate {
		t.Fatal("deleted job's key still held")
	}
	if n := tagRows(t, h, s); n != 2 {
		t.Fatalf("%d tag rows, want 2", n)
	}
	if err := s.Delete(ctx, js[3].ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("delete a pending job: %v", err)
	}
	if err := s.Delete(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
	if err := s.Delete(ctx, js[2].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, js[2].ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if n := tagRows(t, h, s); n != 1 {
		t.Fatalf("%d tag rows, want 1", n)
	}
	if n := ok(s.BulkDelete(ctx, readpast.JobFilter{Kind: "d"})).must(t); n != 0 {
		t.Fatalf("deleted %d live jobs", n)
	}
	wantState(t, s, js[3].ID, readpast.StatePending)
}

// testBulkFilterRequired: an empty filter, or a state the action does not
// apply to, is refused and changes nothing.
func testBulkFilterRequired(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	for name, f := range map[string]func(readpast.JobFilter) (int, error){
		"retry":  func(f readpast.JobFilter) (int, error) { return s.BulkRetry(ctx, f) },
		"cancel": func(f readpast.JobFilter) (int, error) { return s.BulkCancel(ctx, f) },
		"delete": func(f readpast.JobFilter) (int, error) { return s.BulkDelete(ctx, f) },
	} {
		var fe *readpast.FieldError
		if _, err := f(readpast.JobFilter{}); !errors.As(err, &fe) || fe.Field != "filter" {
			t.Fatalf("bulk %s with an empty filter: %v", name, err)
		}
		if _, err := f(readpast.JobFilter{Queue: "a b"}); !errors.As(err, &fe) || fe.Field != "queue" {
			t.Fatalf("bulk %s with a bad queue: %v", name, err)
		}
	}
	if _, err := s.BulkCancel(ctx, readpast.JobFilter{State: readpast.StateFailed}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bulk cancel of failed jobs: %v", err)
	}
	if _, err := s.BulkRetry(ctx, readpast.JobFilter{State: readpast.StatePending}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bulk retry of pending jobs: %v", err)
	}
	if _, err := s.BulkDelete(ctx, readpast.JobFilter{State: readpast.StateRunning}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bulk delete of running jobs: %v", err)
	}
	wantState(t, s, j.ID, readpast.StatePending)
}
