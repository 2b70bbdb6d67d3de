package storetest

import (
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testScheduleNeverGoesBack replays the windows in which a schedule's next
// tick could go back to a tick that has fired: a scheduler whose clock runs
// ahead (or a put or resume whose statement reaches the database after a
// scheduler fired) fires tick T1; then a put that changes the expression,
// and a resume, each computed from a caller's clock that is before T1. The
// next tick must stay after T1, and the scheduler must go on without an
// error. Before, both set the next tick back to T1, and every fire of it
// failed on the run table's key. And a fire of a tick at or before the last
// one that fired makes no job and moves the schedule on.
func testScheduleNeverGoesBack(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	sc, _ := putSchedule(t, s, schedParams("y", "0 0 1 1 *")) // every new year
	t1 := *sc.NextRunAt
	clock := &fakeClock{t: t1.Add(time.Second)} // a scheduler just past T1
	sch := readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now})
	if n := ok(sch.Tick(ctx)).must(t); n != 1 {
		t.Fatalf("the scheduler at T1 made %d jobs, want 1", n)
	}
	after := func(what string) *readpast.Schedule {
		t.Helper()
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
		return got
	}

	// A put that changes the expression, from a clock before T1.
	p := schedParams("y", "@yearly")
	putSchedule(t, s, p)
	after("a put that changed the expression")

	// A resume, from a clock before T1.
	ok(s.PauseSchedule(ctx, "y", true)).must(t)
	ok(s.PauseSchedule(ctx, "y", false)).must(t)
	cur := after("a resume")

	// A fire of T1 again (as a scheduler that read a wedged schedule would
	// send): no job, no error, and the schedule moves on.
	t3 := cur.NextRunAt.AddDate(1, 0, 0)
	fired, job, err := s.FireSchedule(ctx, readpast.Firing{Name: "y", Version: cur.Version, Expect: *cur.NextRunAt, Tick: &t1, Next: &t3})
	if err != nil || !fired || job != nil {
		t.Fatalf("a fire of T1, which fired: fired %v, job %+v, error %v; want fired with no job", fired, job, err)
	}
	if got := ok(s.GetSchedule(ctx, "y")).must(t); !got.NextRunAt.Equal(t3) || !got.LastRunAt.Equal(t1) {
		t.Fatalf("after a fire of a fired tick: next %v, last %v; want %v, %v", got.NextRunAt, got.LastRunAt, t3, t1)
	}
	if runs := ok(s.ScheduleRuns(ctx, "y", 10)).must(t); len(runs) != 1 || countKind(t, s, "tick") != 1 {
		t.Fatalf("runs %+v and %d jobs, want T1's one", runs, countKind(t, s, "tick"))
	}
}
