package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testPause: a paused queue's jobs are not claimed, alone or with other
// queues, while enqueues still work and its running jobs finish; resuming
// makes them claimable; Queues shows the pause and the counts; a group
// whose head waits in a paused queue holds its other jobs back.
func testPause(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "qa"},
		readpast.EnqueueParams{Kind: "k", Queue: "qa"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb"},
		readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: "G"},
		readpast.EnqueueParams{Kind: "k", Queue: "qb", Group: "G"},
	)
	running := claim(t, s, 1, time.Minute, "qa")
	if err := s.PauseQueue(ctx, "qa"); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseQueue(ctx, "qa"); err != nil {
		t.Fatalf("pausing a paused queue: %v", err)
	}
	if c := claim(t, s, 10, time.Minute, "qa"); len(c) != 0 {
		t.Fatalf("claimed %v from a paused queue", ids(c))
	}
	// qb gives its own job, not G's: G's head waits in the paused qa.
	if c := claim(t, s, 10, time.Minute, "qa", "qb"); len(c) != 1 || c[0].ID != jobs[2].ID {
		t.Fatalf("claimed %v from qa (paused) and qb, want only qb's ungrouped job %d", ids(c), jobs[2].ID)
	}
	late := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "qa"})[0]
	if err := completeOne(ctx, s, running[0], ""); err != nil {
		t.Fatalf("a job running when its queue was paused cannot finish: %v", err)
	}
	qs := ok(s.Queues(ctx)).must(t)
	byName := map[string]readpast.QueueInfo{}
	for _, q := range qs {
		byName[q.Name] = q
	}
	qa := byName["qa"]
	if !qa.Paused || qa.PausedAt == nil || qa.Counts[readpast.StatePending] != 3 || qa.Counts[readpast.StateSucceeded] != 1 {
		t.Fatalf("queues: qa = %+v", qa)
	}
	if qb := byName["qb"]; qb.Paused || qb.Counts[readpast.StateRunning] != 1 || qb.Counts[readpast.StatePending] != 1 {
		t.Fatalf("queues: qb = %+v", qb)
	}
	if err := s.ResumeQueue(ctx, "qa"); err != nil {
		t.Fatal(err)
	}
	if err := s.ResumeQueue(ctx, "qa"); err != nil {
		t.Fatalf("resuming a queue that is not paused: %v", err)
	}
	c := claim(t, s, 10, time.Minute, "qa", "qb")
	if got, want := ids(c), []int64{jobs[1].ID, jobs[3].ID, late.ID}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("after resume claimed %v, want %v", got, want)
	}
	for _, q := range ok(s.Queues(ctx)).must(t) {
		if q.Paused {
			t.Fatalf("queue %s still paused after resume", q.Name)
		}
	}
	// A queue that has no jobs yet can be paused, and shows.
	if err := s.PauseQueue(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range ok(s.Queues(ctx)).must(t) {
		found = found || (q.Name == "empty" && q.Paused && len(q.Counts) == 0)
	}
	if !found {
		t.Fatal("a paused queue without jobs is not listed")
	}
	if err := s.PauseQueue(ctx, "has space"); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("pause a bad name: %v", err)
	}
}
