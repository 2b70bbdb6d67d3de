package storetest

import (
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Promise: a schedule's next tick never goes back to or before a tick that
// has fired, and a tick fires at most once, whatever the clocks of the
// callers, the run table's trimming or the order in which statements reach
// the database.
//
// The tests below replay each window with a scheduler whose clock runs
// ahead of the caller's (a test-controlled clock): the scheduler fires tick
// T1 of a yearly schedule (next new year) at T1 + 1 s; then a put or a
// resume computes from a clock before T1, exactly as a statement that was
// delayed (pool wait, GC pause, network hop) between the caller's clock
// read and the database would.

// yearlyFiredT1 puts schedule y (every new year) and has a scheduler whose
// clock is just past its next tick T1 fire T1. It returns the scheduler
// (its clock stays there) and T1.
func yearlyFiredT1(t *testing.T, s readpast.Store, p readpast.ScheduleParams) (*readpast.Scheduler, time.Time) {
	t.Helper()
	sc, _ := putSchedule(t, s, p)
	t1 := *sc.NextRunAt
	clock := &fakeClock{t: t1.Add(time.Second)}
	sch := readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now})
	if n := ok(sch.Tick(ctxT(t))).must(t); n != 1 {
		t.Fatalf("the scheduler at T1 made %d jobs, want 1", n)
	}
	return sch, t1
}

// checkAfterT1 checks that schedule y's next tick is after T1, which fired,
// and that the scheduler, still at T1 + 1 s, goes on without an error and
// makes no job (T1 fired already, and the next tick is not due).
func checkAfterT1(t *testing.T, s readpast.Store, sch *readpast.Scheduler, t1 time.Time, what string) *readpast.Schedule {
	t.Helper()
	ctx := ctxT(t)
	got := ok(s.GetSchedule(ctx, "y")).must(t)
	if got.LastRunAt == nil || !got.LastRunAt.Equal(t1) {
		t.Fatalf("%s: last run %v, want T1 %v", what, got.LastRunAt, t1)
	}
	if got.NextRunAt == nil || !got.NextRunAt.After(t1) {
		t.Fatalf("%s: the next tick is %v, not after T1 %v, which fired", what, got.NextRunAt, t1)
	}
	n, err := sch.Tick(ctx)
	if err != nil || n != 0 {
		t.Fatalf("%s: the scheduler at T1 made %d jobs, error %v; want none", what, n, err)
	}
	if runs := ok(s.ScheduleRuns(ctx, "y", 10)).must(t); len(runs) != 1 || countKind(t, s, "tick") != 1 {
		t.Fatalf("%s: runs %+v and %d jobs, want T1's one", what, runs, countKind(t, s, "tick"))
	}
	return got
}

// testSchedulePutNeverGoesBack: a put that changes the expression, computed
// from a clock before T1, after a scheduler fired T1. Before the fix the
// next tick went back to T1, and every fire of it then failed on the run
// table's key.
func testSchedulePutNeverGoesBack(t *testing.T, h Harness) {
	s := newStore(t, h)
	sch, t1 := yearlyFiredT1(t, s, schedParams("y", "0 0 1 1 *"))
	putSchedule(t, s, schedParams("y", "@yearly")) // the same ticks, another expression
	checkAfterT1(t, s, sch, t1, "a put that changed the expression")
	// Paused by a put, then running again by another put.
	paused := schedParams("y", "0 0 1 1 *")
	paused.Paused = new(bool)
	*paused.Paused = true
	putSchedule(t, s, paused)
	*paused.Paused = false
	putSchedule(t, s, paused)
	checkAfterT1(t, s, sch, t1, "a put that paused it, then one that let it run")
}

// testScheduleResumeNeverGoesBack: a pause, then a resume computed from a
// clock before T1, after a scheduler fired T1. Before the fix the resume
// set the next tick back to T1.
func testScheduleResumeNeverGoesBack(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	sch, t1 := yearlyFiredT1(t, s, schedParams("y", "0 0 1 1 *"))
	ok(s.PauseSchedule(ctx, "y", true)).must(t)
	ok(s.PauseSchedule(ctx, "y", false)).must(t)
	checkAfterT1(t, s, sch, t1, "a resume")
}

// testScheduleFiredTickMovesOn: a schedule whose next tick is a tick that
// fired (as a store before the fix could leave it) fires nothing for it
// and moves on, with either catch-up policy: no error, no second job for
// it. A scheduler that comes too late to fire the tick after it on time
// skips, or with catch_up once makes the one catch-up job for that later
// tick. Before the fix every fire of it failed with a duplicate key on the
// run table: with catch_up once forever (the catch-up job was that tick
// again).
func testScheduleFiredTickMovesOn(t *testing.T, h Harness) {
	for _, k := range []struct {
		name   string
		policy readpast.CatchUp
		late   time.Duration // after T1, the scheduler's clock
		jobs   int           // made by the scheduler
	}{
		{"skip/on_time", readpast.CatchUpSkip, time.Second, 0},
		{"skip/late", readpast.CatchUpSkip, 2 * 366 * 24 * time.Hour, 0},
		{"once/on_time", readpast.CatchUpOnce, time.Second, 0},
		{"once/late", readpast.CatchUpOnce, 2 * 366 * 24 * time.Hour, 1}, // for T2
	} {
		t.Run(k.name, func(t *testing.T) {
			s := newStore(t, h)
			ctx := ctxT(t)
			p := schedParams("y", "0 0 1 1 *")
			p.CatchUp = k.policy
			sc, _ := putSchedule(t, s, p)
			t1 := *sc.NextRunAt
			// Fire T1 and leave the next tick at T1: the wedged state.
			fired, job, err := s.FireSchedule(ctx, readpast.Firing{Name: "y", Version: sc.Version, Expect: t1, Tick: &t1, Next: &t1})
			if err != nil || !fired || job == nil {
				t.Fatalf("fire T1: fired %v, job %+v, error %v", fired, job, err)
			}
			now := t1.Add(k.late)
			sch := readpast.NewScheduler(s, readpast.SchedulerConfig{Now: func() time.Time { return now }})
			n, err := sch.Tick(ctx)
			if err != nil || n != k.jobs || sch.Failures() != 0 {
				t.Fatalf("scheduler at T1 + %v: %d jobs, error %v, %d failures; want %d jobs, no error", k.late, n, err, sch.Failures(), k.jobs)
			}
			got := ok(s.GetSchedule(ctx, "y")).must(t)
			if got.NextRunAt == nil || !got.NextRunAt.After(now) {
				t.Fatalf("next tick %v, want after the scheduler's clock %v", got.NextRunAt, now)
			}
			runs := ok(s.ScheduleRuns(ctx, "y", 10)).must(t)
			if len(runs) != 1+k.jobs || !runs[len(runs)-1].Tick.Equal(t1) {
				t.Fatalf("runs %+v, want T1's and %d more", runs, k.jobs)
			}
			if k.jobs == 1 && (!runs[0].Tick.After(t1) || !runs[0].CatchUp) {
				t.Fatalf("the catch-up run %+v, want a catch-up for a tick after T1 %v", runs[0], t1)
			}
		})
	}
}

// testScheduleTickFiresOnceAfterTrim: the run table keeps a schedule's
// latest runs only; a fire of a tick whose run was trimmed away must still
// make no job (the check is the last fired tick on the schedule's row, not
// the run table). Before the fix the old tick fired a second time.
func testScheduleTickFiresOnceAfterTrim(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	sc, _ := putSchedule(t, s, schedParams("m", "* * * * *"))
	t0 := *sc.NextRunAt
	const ticks = 105
	tick := t0
	for range ticks {
		next := tick.Add(time.Minute)
		if fired, job, err := s.FireSchedule(ctx, readpast.Firing{Name: "m", Version: sc.Version, Expect: tick, Tick: &tick, Next: &next}); err != nil || !fired || job == nil {
			t.Fatalf("fire %v: fired %v, job %+v, error %v", tick, fired, job, err)
		}
		tick = next
	}
	runs := ok(s.ScheduleRuns(ctx, "m", 1000)).must(t)
	if len(runs) >= ticks || !runs[len(runs)-1].Tick.After(t0) {
		t.Fatalf("%d runs kept, oldest %v: T0's run was not trimmed", len(runs), runs[len(runs)-1].Tick)
	}
	// tick is the next one; a fire of T0 (trimmed) with it as Expect.
	next := tick.Add(time.Minute)
	fired, job, err := s.FireSchedule(ctx, readpast.Firing{Name: "m", Version: sc.Version, Expect: tick, Tick: &t0, Next: &next})
	if err != nil || !fired || job != nil {
		t.Fatalf("a fire of T0, which fired and whose run was trimmed: fired %v, job %+v, error %v; want fired with no job", fired, job, err)
	}
	if n := countKind(t, s, "tick"); n != ticks {
		t.Fatalf("%d jobs after %d ticks, want %d: a tick fired twice", n, ticks, ticks)
	}
	if got := ok(s.GetSchedule(ctx, "m")).must(t); !got.NextRunAt.Equal(next) || !got.LastRunAt.Equal(tick.Add(-time.Minute)) {
		t.Fatalf("next %v, last %v; want %v, %v", got.NextRunAt, got.LastRunAt, next, tick.Add(-time.Minute))
	}
}

// testScheduleDeleteLeavesNothing: a deleted schedule leaves no run, and a
// schedule created later under its name starts afresh: no runs, no last
// fired tick, and its first tick fires.
func testScheduleDeleteLeavesNothing(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	sch, t1 := yearlyFiredT1(t, s, schedParams("y", "0 0 1 1 *"))
	if err := s.DeleteSchedule(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	sc, created := putSchedule(t, s, schedParams("y", "0 0 1 1 *"))
	if !created || sc.LastRunAt != nil || sc.NextRunAt == nil || !sc.NextRunAt.Equal(t1) {
		t.Fatalf("the new schedule: created %v, %+v; want created, never run, next %v", created, sc, t1)
	}
	if runs := ok(s.ScheduleRuns(ctx, "y", 10)).must(t); len(runs) != 0 {
		t.Fatalf("the new schedule lists %d runs of the deleted one", len(runs))
	}
	if n, err := sch.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("the new schedule's first tick: %d jobs, error %v; want 1", n, err)
	}
}
