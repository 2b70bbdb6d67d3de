package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testInspectQueue: the queue page's reads (readpast.Inspector) keep to
// one queue: its activity minute by minute, its busiest groups counting
// its own jobs, and its due job that has waited longest.
func testInspectQueue(t *testing.T, h Harness) {
	t.Run("QueueActivity", func(t *testing.T) { testQueueActivity(t, h) })
	t.Run("QueueGroups", func(t *testing.T) { testQueueGroups(t, h) })
	t.Run("OldestDueJob", func(t *testing.T) { testOldestDueJob(t, h) })
}

func testQueueActivity(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	since := time.Now().Add(-time.Minute)
	// qa: one succeeds. qb: one fails for good, one runs.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qa"})
	if err := completeOne(ctx, s, claim(t, s, 1, time.Minute, "qa")[0], ""); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qb"})
	c := claim(t, s, 1, time.Minute, "qb")[0]
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "x", Discard: true}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qb"})
	claim(t, s, 1, time.Minute, "qb")

	sum := func(minutes []readpast.ActivityMinute) readpast.ActivityMinute {
		var out readpast.ActivityMinute
		for _, m := range minutes {
			out.Succeeded += m.Succeeded
			out.Failed += m.Failed
			out.Cancelled += m.Cancelled
			out.Started += m.Started
		}
		return out
	}
	for _, tc := range []struct {
		queue                      string
		succeeded, failed, started int64
	}{
		{"qa", 1, 0, 1},
		{"qb", 0, 1, 2},
		{"nosuch", 0, 0, 0},
	} {
		got := sum(ok(in.QueueActivity(ctx, tc.queue, since)).must(t))
		if got.Succeeded != tc.succeeded || got.Failed != tc.failed || got.Cancelled != 0 || got.Started != tc.started {
			t.Errorf("queue %s: %+v, want %d succeeded, %d failed, %d started", tc.queue, got, tc.succeeded, tc.failed, tc.started)
		}
	}
	if all := sum(ok(in.Activity(ctx, since)).must(t)); all.Succeeded != 1 || all.Failed != 1 || all.Started != 3 {
		t.Errorf("every queue: %+v, want 1 succeeded, 1 failed, 3 started", all)
	}
	if _, err := in.QueueActivity(ctx, "", since); !errors.Is(err, readpast.ErrInvalid) {
		t.Errorf("no queue: %v, want ErrInvalid", err)
	}
}

func testQueueGroups(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	// qa: g2's job first in claim order, then three of g1. qb: one of g1,
	// two of g3, and one of g3 and g4 (counted under both).
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: "g2", Priority: -1},
		readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb", Group: "g1"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb", Group: "g3"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb", Group: "g3"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb", Keys: []string{"g3", "g4"}},
	)
	if c := claim(t, s, 1, time.Minute, "qa"); len(c) != 1 || c[0].Group == nil || *c[0].Group != "g2" {
		t.Fatalf("claimed %+v, want the job of g2", c)
	}
	for _, tc := range []struct {
		queue string
		limit int
		want  []readpast.GroupLoad
	}{
		{"qa", 10, []readpast.GroupLoad{{Group: "g1", Pending: 3, Limit: 1}, {Group: "g2", Running: 1, Limit: 1}}},
		{"qa", 1, []readpast.GroupLoad{{Group: "g1", Pending: 3, Limit: 1}}},
		{"qb", 10, []readpast.GroupLoad{{Group: "g3", Pending: 3, Limit: 1}, {Group: "g1", Pending: 1, Limit: 1}, {Group: "g4", Pending: 1, Limit: 1}}},
		{"nosuch", 10, []readpast.GroupLoad{}},
	} {
		got := ok(in.QueueGroups(ctx, tc.queue, tc.limit)).must(t)
		if !slices.Equal(got, tc.want) {
			t.Errorf("queue %s, limit %d: %+v, want %+v", tc.queue, tc.limit, got, tc.want)
		}
	}
	// Every queue, as before: g1 counts its jobs in both.
	want := []readpast.GroupLoad{{Group: "g1", Pending: 4, Limit: 1}, {Group: "g3", Pending: 3, Limit: 1}, {Group: "g2", Running: 1, Limit: 1}, {Group: "g4", Pending: 1, Limit: 1}}
	if got := ok(in.BusiestGroups(ctx, 10)).must(t); !slices.Equal(got, want) {
		t.Errorf("every queue: %+v, want %+v", got, want)
	}
	if _, err := in.QueueGroups(ctx, "qa", 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Errorf("limit 0: %v, want ErrInvalid", err)
	}
	if _, err := in.QueueGroups(ctx, "", 10); !errors.Is(err, readpast.ErrInvalid) {
		t.Errorf("no queue: %v, want ErrInvalid", err)
	}
}

func testOldestDueJob(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	now := time.Now().Truncate(time.Microsecond)
	// A job due an hour ago that runs, then (in order) a grouped and an
	// ungrouped job due ten minutes ago, one due five minutes ago and one
	// due in an hour.
	run := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qo", RunAt: now.Add(-time.Hour)})[0]
	if c := claim(t, s, 1, time.Minute, "qo"); len(c) != 1 || c[0].ID != run.ID {
		t.Fatalf("claimed %v, want %d", ids(c), run.ID)
	}
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "qo", Group: "og", RunAt: now.Add(-10 * time.Minute)},
		readpast.EnqueueParams{Kind: "k", Queue: "qo", RunAt: now.Add(-10 * time.Minute)},
		readpast.EnqueueParams{Kind: "k", Queue: "qo", RunAt: now.Add(-5 * time.Minute)},
		readpast.EnqueueParams{Kind: "k", Queue: "qo", RunAt: now.Add(time.Hour)},
		readpast.EnqueueParams{Kind: "k", Queue: "later", RunAt: now.Add(time.Hour)},
		readpast.EnqueueParams{Kind: "k", Queue: "other", RunAt: now.Add(-2 * time.Hour)},
	)
	oldest := func(queue string) int64 {
		t.Helper()
		j := ok(in.OldestDueJob(ctx, queue)).must(t)
		if j == nil {
			return 0
		}
		if j.Queue != queue || j.State != readpast.StatePending || j.RunAt.After(time.Now()) {
			t.Fatalf("queue %s: oldest due job %+v", queue, j)
		}
		return j.ID
	}
	if got := oldest("qo"); got != jobs[0].ID {
		t.Fatalf("oldest due job of qo: %d, want %d (the grouped one, due ten minutes ago, enqueued first)", got, jobs[0].ID)
	}
	ok(s.Cancel(ctx, jobs[0].ID)).must(t)
	if got := oldest("qo"); got != jobs[1].ID {
		t.Fatalf("after cancelling %d: %d, want %d", jobs[0].ID, got, jobs[1].ID)
	}
	ok(s.Cancel(ctx, jobs[1].ID)).must(t)
	if got := oldest("qo"); got != jobs[2].ID {
		t.Fatalf("after cancelling %d: %d, want %d", jobs[1].ID, got, jobs[2].ID)
	}
	if got := oldest("later"); got != 0 {
		t.Fatalf("a queue with nothing due: %d", got)
	}
	if got := oldest("nosuch"); got != 0 {
		t.Fatalf("an unknown queue: %d", got)
	}
	if got := oldest("other"); got != jobs[5].ID {
		t.Fatalf("queue other: %d, want %d", got, jobs[5].ID)
	}
	if _, err := in.OldestDueJob(ctx, ""); !errors.Is(err, readpast.ErrInvalid) {
		t.Errorf("no queue: %v, want ErrInvalid", err)
	}
}
