package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testRunNow: RunNow makes a scheduled job due now and claimable at once,
// leaves a due job's run-at (its place in claim order) alone, and refuses
// every job that is not pending, changing nothing: it never revives a
// finished job as Retry does.
func testRunNow(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)

	// A job scheduled an hour from now: due now, and claimed at once.
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "rn", RunAt: time.Now().Add(time.Hour)})[0]
	if c := claim(t, s, 10, time.Minute, "rn"); len(c) != 0 {
		t.Fatalf("claimed %v before its run-at", ids(c))
	}
	before := time.Now()
	j, err := s.RunNow(ctx, later.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != later.ID || j.State != readpast.StatePending || j.RunAt.After(time.Now().Add(time.Second)) || j.RunAt.Before(before.Add(-time.Minute)) {
		t.Fatalf("RunNow of a job due in an hour: %+v, want it pending and due now", j)
	}
	if got := get(t, s, later.ID); !got.RunAt.Equal(j.RunAt) || got.Attempt != 0 {
		t.Fatalf("after RunNow the store has run-at %v, attempt %d; RunNow returned %v", got.RunAt, got.Attempt, j.RunAt)
	}
	if c := claim(t, s, 10, time.Minute, "rn"); len(c) != 1 || c[0].ID != later.ID {
		t.Fatalf("after RunNow claimed %v, want [%d]", ids(c), later.ID)
	}

	// A job due already keeps its run-at, so its place: a Retry-like
	// "run-at = now" would put it behind the job due after it.
	first := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "due", RunAt: time.Now().Add(-2 * time.Minute)})[0]
	second := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "due", RunAt: time.Now().Add(-time.Minute)})[0]
	j, err = s.RunNow(ctx, first.ID)
	if err != nil || j.State != readpast.StatePending || !j.RunAt.Equal(first.RunAt) {
		t.Fatalf("RunNow of a due job: %+v, %v; want it unchanged, run-at %v", j, err, first.RunAt)
	}
	if got := get(t, s, first.ID); !got.RunAt.Equal(first.RunAt) {
		t.Fatalf("RunNow of a due job moved its run-at from %v to %v", first.RunAt, got.RunAt)
	}
	if c := claim(t, s, 1, time.Minute, "due"); len(c) != 1 || c[0].ID != first.ID {
		t.Fatalf("claimed %v, want [%d] before %d: RunNow of a due job must keep its place", ids(c), first.ID, second.ID)
	}

	// Every state but pending is refused, and nothing changes.
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "st", RunAt: time.Now().Add(-3 * time.Second)},
		readpast.EnqueueParams{Kind: "k", Queue: "st", RunAt: time.Now().Add(-2 * time.Second)},
		readpast.EnqueueParams{Kind: "k", Queue: "st", RunAt: time.Now().Add(-time.Second)})
	c := claim(t, s, 3, time.Minute, "st")
	if len(c) != 3 {
		t.Fatalf("claimed %v, want 3", ids(c))
	}
	running, done, failed := c[0], c[1], c[2]
	if err := completeOne(ctx, s, done, `{"ok":true}`); err != nil {
		t.Fatal(err)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: failed.ID, Token: failed.Token, Message: "boom", Discard: true}); err != nil {
		t.Fatal(err)
	}
	cancelled := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "st", RunAt: time.Now().Add(time.Hour)})[0]
	ok(s.Cancel(ctx, cancelled.ID)).must(t)
	for _, tc := range []struct {
		id    int64
		state readpast.JobState
	}{
		{running.ID, readpast.StateRunning},
		{done.ID, readpast.StateSucceeded},
		{failed.ID, readpast.StateFailed},
		{cancelled.ID, readpast.StateCancelled},
	} {
		was := get(t, s, tc.id)
		j, err := s.RunNow(ctx, tc.id)
		if !errors.Is(err, readpast.ErrInvalidState) || !strings.Contains(err.Error(), string(tc.state)) || j != nil {
			t.Errorf("RunNow of a %s job: %+v, %v; want ErrInvalidState naming %s", tc.state, j, err, tc.state)
		}
		now := get(t, s, tc.id)
		if now.State != was.State || !now.RunAt.Equal(was.RunAt) || now.Attempt != was.Attempt || now.Token != was.Token ||
			!equalTimes(now.FinishedAt, was.FinishedAt) || len(now.Errors) != len(was.Errors) {
			t.Errorf("RunNow of a %s job changed it: %+v, was %+v", tc.state, now, was)
		}
	}
	if c := claim(t, s, 10, time.Minute, "st"); len(c) != 0 {
		t.Fatalf("after the refused RunNows claimed %v: a finished job came back", ids(c))
	}
	if err := completeOne(ctx, s, running, ""); err != nil {
		t.Fatalf("the running job's claim after a refused RunNow: %v", err)
	}

	if j, err := s.RunNow(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) || j != nil {
		t.Fatalf("RunNow of an unknown id: %+v, %v; want ErrNotFound", j, err)
	}
}

// testRunNowGroup: a grouped job made due by RunNow is claimable at once
// while its key has a free slot (the mark of its enqueue lies at its old
// run-at, an hour away), and once a slot frees when it has none.
func testRunNowGroup(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "gq", Group: "rn-g", RunAt: time.Now().Add(time.Hour)})[0]
	if c := claim(t, s, 10, time.Minute, "gq"); len(c) != 0 {
		t.Fatalf("claimed %v before its run-at", ids(c))
	}
	ok(s.RunNow(ctx, later.ID)).must(t)
	c := claim(t, s, 10, time.Minute, "gq")
	if len(c) != 1 || c[0].ID != later.ID {
		t.Fatalf("after RunNow claimed %v, want [%d]: its key has a free slot", ids(c), later.ID)
	}

	// Its key busy (limit 1, a job running): claimable when the slot frees.
	next := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "gq", Group: "rn-g", RunAt: time.Now().Add(time.Hour)})[0]
	ok(s.RunNow(ctx, next.ID)).must(t)
	if got := claim(t, s, 10, time.Minute, "gq"); len(got) != 0 {
		t.Fatalf("claimed %v while its key's one slot is taken", ids(got))
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, 10, time.Minute, "gq"); len(got) != 1 || got[0].ID != next.ID {
		t.Fatalf("after the key's job completed claimed %v, want [%d]", ids(got), next.ID)
	}
}

// testScheduleRunNow: readpast.RunSchedule enqueues the schedule's job due
// now, paused or not, and leaves the schedule as it was: its next and
// last tick, its version and its runs. The tick after it still fires, once.
func testScheduleRunNow(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	p := readpast.ScheduleParams{Name: "nightly", Cron: "0 3 * * *", Job: readpast.EnqueueParams{
		Kind: "report", Queue: "reports", Payload: []byte(`{"team":7}`), Priority: 3, Group: "reports", MaxAttempts: 4}}
	sc, _ := putSchedule(t, s, p)
	// A tick fired a day before the next one, as a scheduler would have.
	tick := sc.NextRunAt.Add(-24 * time.Hour)
	fired, tickJob, err := s.FireSchedule(ctx, readpast.Firing{Name: sc.Name, Version: sc.Version, Expect: *sc.NextRunAt, Tick: &tick, Next: sc.NextRunAt})
	if err != nil || !fired || tickJob == nil {
		t.Fatalf("fire: %v %v %v", fired, tickJob, err)
	}
	sc = ok(s.GetSchedule(ctx, "nightly")).must(t)
	runs := ok(s.ScheduleRuns(ctx, "nightly", readpast.ScheduleRunsKept)).must(t)

	before := time.Now()
	j, err := readpast.RunSchedule(ctx, s, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != readpast.StatePending || j.Kind != "report" || j.Queue != "reports" || !jsonEqual(j.Payload, []byte(`{"team":7}`)) ||
		j.Priority != 3 || j.Group == nil || *j.Group != "reports" || j.MaxAttempts != 4 ||
		j.RunAt.Before(before.Add(-time.Minute)) || j.RunAt.After(time.Now().Add(time.Second)) || j.ID == tickJob.ID {
		t.Fatalf("RunSchedule made %+v; want the schedule's job, due now", j)
	}
	after := ok(s.GetSchedule(ctx, "nightly")).must(t)
	if !equalTimes(after.NextRunAt, sc.NextRunAt) || !equalTimes(after.LastRunAt, sc.LastRunAt) || after.Version != sc.Version ||
		after.LastJobID == nil || *after.LastJobID != tickJob.ID {
		t.Fatalf("RunSchedule changed the schedule: %+v, was %+v", after, sc)
	}
	if got := ok(s.ScheduleRuns(ctx, "nightly", readpast.ScheduleRunsKept)).must(t); len(got) != len(runs) || got[0].JobID != tickJob.ID {
		t.Fatalf("RunSchedule changed the runs: %+v, was %+v", got, runs)
	}
	// Claimable at once (the tick's job holds the key's one slot first).
	c := claim(t, s, 10, time.Minute, "reports")
	if len(c) != 1 || c[0].ID != tickJob.ID {
		t.Fatalf("claimed %v, want the tick's job %d first", ids(c), tickJob.ID)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute, "reports"); len(c) != 1 || c[0].ID != j.ID {
		t.Fatalf("claimed %v, want the manual run's job %d", ids(c), j.ID)
	}

	// The next tick fires as if nothing had happened, once.
	next := sc.NextRunAt.Add(24 * time.Hour)
	fired, nextJob, err := s.FireSchedule(ctx, readpast.Firing{Name: sc.Name, Version: sc.Version, Expect: *sc.NextRunAt, Tick: sc.NextRunAt, Next: &next})
	if err != nil || !fired || nextJob == nil {
		t.Fatalf("the tick after a manual run: %v %v %v", fired, nextJob, err)
	}
	if again, _, err := s.FireSchedule(ctx, readpast.Firing{Name: sc.Name, Version: sc.Version, Expect: *sc.NextRunAt, Tick: sc.NextRunAt, Next: &next}); err != nil || again {
		t.Fatalf("the tick fired twice: %v %v", again, err)
	}

	// A paused schedule runs too, and stays paused.
	ok(s.PauseSchedule(ctx, "nightly", true)).must(t)
	paused := ok(s.GetSchedule(ctx, "nightly")).must(t)
	if j, err := readpast.RunSchedule(ctx, s, "nightly"); err != nil || j.Kind != "report" {
		t.Fatalf("RunSchedule of a paused schedule: %+v, %v", j, err)
	}
	if sc := ok(s.GetSchedule(ctx, "nightly")).must(t); !sc.Paused || sc.NextRunAt != nil || sc.Version != paused.Version {
		t.Fatalf("RunSchedule changed a paused schedule: %+v", sc)
	}

	if j, err := readpast.RunSchedule(ctx, s, "none"); !errors.Is(err, readpast.ErrScheduleNotFound) || j != nil {
		t.Fatalf("RunSchedule of an unknown schedule: %+v, %v; want ErrScheduleNotFound", j, err)
	}
}

// equalTimes reports whether a and b are both nil or the same instant.
func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
