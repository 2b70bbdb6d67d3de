package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func make5(kind string) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, 5)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: kind}
	}
	return ps
}

func testGroupExclusion(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	g1 := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "G"},
		readpast.EnqueueParams{Kind: "k", Group: "G"},
		readpast.EnqueueParams{Kind: "k", Group: "G"},
	)
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != g1[0].ID {
		t.Fatalf("claimed %v, want only the oldest of the group [%d]", ids(c), g1[0].ID)
	}
	if more := claim(t, s, 10, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %v while the group was busy", ids(more))
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != g1[1].ID {
		t.Fatalf("after completion claimed %v, want [%d]", ids(c), g1[1].ID)
	}
}

// testGroupAcrossQueues: a group is one ordered stream whatever queues its
// jobs are in. A claimer of queue b does not start the group's job in b
// while the group's older job in queue a waits.
func testGroupAcrossQueues(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "a", Group: "S"},
		readpast.EnqueueParams{Kind: "k", Queue: "b", Group: "S"},
		readpast.EnqueueParams{Kind: "k", Queue: "b"},
	)
	if c := claim(t, s, 10, time.Minute, "b"); fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[2].ID}) {
		t.Fatalf("claimer of b took %v; want only the ungrouped job %d while the group's head waits in a", ids(c), jobs[2].ID)
	}
	c := claim(t, s, 10, time.Minute, "a")
	if len(c) != 1 || c[0].ID != jobs[0].ID {
		t.Fatalf("claimer of a took %v, want [%d]", ids(c), jobs[0].ID)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute, "b"); len(c) != 1 || c[0].ID != jobs[1].ID {
		t.Fatalf("after the head finished, claimer of b took %v, want [%d]", ids(c), jobs[1].ID)
	}
}

func testGroupLimit(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "K", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupLimit(ctx, "K", 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
	jobs := enqueue(t, s, make5("k")[0], readpast.EnqueueParams{Kind: "k", Group: "K"}, readpast.EnqueueParams{Kind: "k", Group: "K"}, readpast.EnqueueParams{Kind: "k", Group: "K"})
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}) {
		t.Fatalf("claimed %v, want the ungrouped job and the group's two oldest", ids(c))
	}
	if err := completeOne(ctx, s, c[1], ""); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != jobs[3].ID {
		t.Fatalf("claimed %v, want [%d]", ids(c), jobs[3].ID)
	}
}

// testGroupLimitChanges: lowering a group's limit below what runs lets
// nothing new start until the group is under the new limit; raising it
// lets more start at once. The limit of a group that never ran survives.
func testGroupLimitChanges(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "L", 3); err != nil {
		t.Fatal(err)
	}
	var ps []readpast.EnqueueParams
	for range 8 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "L"})
	}
	enqueue(t, s, ps...)
	running := claim(t, s, 10, time.Minute)
	if len(running) != 3 {
		t.Fatalf("claimed %d under a limit of 3", len(running))
	}
	if err := s.SetGroupLimit(ctx, "L", 1); err != nil {
		t.Fatal(err)
	}
	for i, j := range running[:2] {
		if err := completeOne(ctx, s, j, ""); err != nil {
			t.Fatal(err)
		}
		if c := claim(t, s, 10, time.Minute); len(c) != 0 {
			t.Fatalf("after %d of 3 finished under a new limit of 1, claimed %d", i+1, len(c))
		}
	}
	if err := completeOne(ctx, s, running[2], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 1 {
		t.Fatalf("with the group empty, claimed %d under a limit of 1", len(c))
	}
	if err := s.SetGroupLimit(ctx, "L", 4); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 3 {
		t.Fatalf("with the limit raised to 4 and 1 running, claimed %d, want 3", len(c))
	}
	// A limit set before the group has ever run.
	if err := s.SetGroupLimit(ctx, "fresh", 2); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "fresh"}, readpast.EnqueueParams{Kind: "k", Group: "fresh"}, readpast.EnqueueParams{Kind: "k", Group: "fresh"})
	if c := claim(t, s, 10, time.Minute); len(c) != 2 {
		t.Fatalf("a fresh group with limit 2 gave %d", len(c))
	}
}

// testGroupNewHead: a job that arrives ahead of a group's running jobs
// (higher priority) runs before the group's older pending jobs, and only
// within the limit.
func testGroupNewHead(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "H", 2); err != nil {
		t.Fatal(err)
	}
	old := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "H"}, readpast.EnqueueParams{Kind: "k", Group: "H"}, readpast.EnqueueParams{Kind: "k", Group: "H"})
	first := claim(t, s, 1, time.Minute)
	if len(first) != 1 || first[0].ID != old[0].ID {
		t.Fatalf("claimed %v, want the oldest", ids(first))
	}
	urgent := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "H", Priority: -1})[0]
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != urgent.ID {
		t.Fatalf("claimed %v, want only the urgent job %d (limit 2, one running)", ids(c), urgent.ID)
	}
	if err := completeOne(ctx, s, first[0], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 1 || c[0].ID != old[1].ID {
		t.Fatalf("claimed %v, want the next oldest %d", ids(c), old[1].ID)
	}
}

// testGroupBacklog: a big batch enqueued into a few groups, ahead of other
// groups and ungrouped jobs in claim order, hides none of them from one
// claim, in any queue.
func testGroupBacklog(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "B", 3); err != nil {
		t.Fatal(err)
	}
	var ps []readpast.EnqueueParams
	for i := range 400 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Group: []string{"A", "B"}[i/200]})
	}
	for i := range 6 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Priority: 1})
	}
	jobs := enqueue(t, s, ps...)
	late := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q2", Group: "C"})[0]
	// A gives its head, B its first three, C its only job, then the six
	// ungrouped jobs (priority 1).
	want := []int64{jobs[0].ID, jobs[200].ID, jobs[201].ID, jobs[202].ID, late.ID}
	for _, j := range jobs[400:] {
		want = append(want, j.ID)
	}
	if got := claim(t, s, 50, time.Minute, "q1", "q2"); fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("claimed %v\nwant    %v", ids(got), want)
	}
	if got := claim(t, s, 50, time.Minute, "q1", "q2"); len(got) != 0 {
		t.Fatalf("claimed %v with every group full", ids(got))
	}
}

// testGroupFutureHead: a group's first job in claim order that is not due
// yet holds back nothing; it runs once it is due and the group has a slot.
// A job that comes due in a group where nothing else happens meanwhile
// (alone, or after the group's other job finished before it came due) is
// found too: nothing but its own enqueue could have announced it.
func testGroupFutureHead(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	// Far enough ahead that the enqueues, the first claim and a completion
	// all happen before it, even on a loaded machine.
	soon := time.Now().Add(1500 * time.Millisecond)
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "F", Priority: -5, RunAt: soon},
		readpast.EnqueueParams{Kind: "k", Group: "F"},
	)
	alone := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "alone", RunAt: soon})[0]
	after := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "after"},
		readpast.EnqueueParams{Kind: "k", Group: "after", RunAt: soon},
	)
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[1].ID, after[0].ID}) {
		t.Fatalf("claimed %v, want the due jobs %d and %d", ids(c), jobs[1].ID, after[0].ID)
	}
	if err := completeOne(ctx, s, c[1], ""); err != nil { // group "after" idle before its next job is due
		t.Fatal(err)
	}
	c = c[:1]
	if time.Now().After(soon) {
		t.Fatal("the set-up took longer than 1.5s: the future jobs came due before it ended")
	}
	time.Sleep(time.Until(soon) + 50*time.Millisecond)
	due := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(due)) != fmt.Sprint([]int64{alone.ID, after[1].ID}) {
		t.Fatalf("once due, claimed %v, want %d and %d (F's slot is still taken)", ids(due), alone.ID, after[1].ID)
	}
	if got := claim(t, s, 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while the group's slot is taken", ids(got))
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, 10, time.Minute); len(got) != 1 || got[0].ID != jobs[0].ID {
		t.Fatalf("claimed %v, want the job that came due, %d", ids(got), jobs[0].ID)
	}
}

// testGroupFreed: every way out of running frees the group slot.
func testGroupFreed(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	ways := []struct {
		name string
		exit func(j *readpast.Job) error
	}{
		{"complete", func(j *readpast.Job) error { return completeOne(ctx, s, j, "") }},
		{"fail-retry", func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now().Add(time.Hour)})
		}},
		{"fail-final", func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", Discard: true})
		}},
		{"release", func(j *readpast.Job) error {
			if err := s.Release(ctx, j.ID, j.Token); err != nil {
				return err
			}
			_, err := s.Cancel(ctx, j.ID) // out of the way
			return err
		}},
		{"cancel", func(j *readpast.Job) error { _, err := s.Cancel(ctx, j.ID); return err }},
		{"expire", func(j *readpast.Job) error {
			time.Sleep(time.Until(*j.LeaseExpiresAt) + 20*time.Millisecond)
			if _, err := s.RescueExpired(ctx, 10); err != nil {
				return err
			}
			_, err := s.Cancel(ctx, j.ID)
			return err
		}},
	}
	for _, w := range ways {
		group := "free-" + w.name
		jobs := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: group}, readpast.EnqueueParams{Kind: "k", Group: group})
		c := claim(t, s, 10, 200*time.Millisecond)
		if len(c) != 1 || c[0].ID != jobs[0].ID {
			t.Fatalf("%s: claimed %v", w.name, ids(c))
		}
		if err := w.exit(c[0]); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		c = claim(t, s, 10, time.Minute)
		if len(c) != 1 || c[0].ID != jobs[1].ID {
			t.Fatalf("%s: after exit claimed %v, want [%d]: slot not freed", w.name, ids(c), jobs[1].ID)
		}
		if _, err := s.Cancel(ctx, c[0].ID); err != nil {
			t.Fatal(err)
		}
	}
}

func testBusyGroup(t *testing.T, h Harness) {
	s := newStore(t, h)
	// A busy group with a long backlog ahead of everything else in claim
	// order must not hold back other groups or ungrouped jobs.
	var ps []readpast.EnqueueParams
	for range 500 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "busy", Priority: -10})
	}
	enqueue(t, s, ps...)
	first := claim(t, s, 1, time.Minute)
	if len(first) != 1 || *first[0].Group != "busy" {
		t.Fatalf("claimed %+v", first)
	}
	others := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "other1"},
		readpast.EnqueueParams{Kind: "k"},
		readpast.EnqueueParams{Kind: "k", Group: "other2"},
	)
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint(ids(others)) {
		t.Fatalf("with a busy group claimed %v, want %v", ids(c), ids(others))
	}
}
