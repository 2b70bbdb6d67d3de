package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func schedParams(name, cron string) readpast.ScheduleParams {
	return readpast.ScheduleParams{Name: name, Cron: cron, Job: readpast.EnqueueParams{Kind: "tick", Payload: []byte(`{"n":1}`)}}
}

func putSchedule(t *testing.T, s readpast.Store, p readpast.ScheduleParams) (*readpast.Schedule, bool) {
	t.Helper()
	sc, created, err := s.PutSchedule(ctxT(t), p)
	if err != nil {
		t.Fatal(err)
	}
	return sc, created
}

func testScheduleCRUD(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	before := time.Now()
	sc, created := putSchedule(t, s, schedParams("hourly", "0 * * * *"))
	if !created || sc.Name != "hourly" || sc.TimeZone != "UTC" || sc.CatchUp != readpast.CatchUpSkip || sc.Paused ||
		sc.Job.Kind != "tick" || sc.Job.Queue != readpast.DefaultQueue || sc.Job.MaxAttempts != readpast.DefaultMaxAttempts {
		t.Fatalf("created %v: %+v", created, sc)
	}
	if sc.NextRunAt == nil || !sc.NextRunAt.After(before) || sc.NextRunAt.Sub(before) > time.Hour || sc.NextRunAt.Minute() != 0 {
		t.Fatalf("next run %v, want the next full hour after %v", sc.NextRunAt, before)
	}
	// The same expression again keeps the next tick; the definition changes.
	p := schedParams("hourly", "0 * * * *")
	p.Job.Queue, p.Job.Priority, p.Job.Group = "q2", 5, "g1"
	again, created := putSchedule(t, s, p)
	if created || !again.NextRunAt.Equal(*sc.NextRunAt) || again.Version <= sc.Version || again.Job.Queue != "q2" ||
		again.Job.Priority != 5 || again.Job.Group != "g1" {
		t.Fatalf("put again: created %v, %+v", created, again)
	}
	// Another expression or time zone moves it.
	p.Cron, p.TimeZone = "30 * * * *", "Asia/Kolkata" // UTC+5:30: minute 30 there is minute 0 in UTC
	moved, _ := putSchedule(t, s, p)
	if moved.NextRunAt.Minute() != 0 || moved.TimeZone != "Asia/Kolkata" || moved.Cron != "30 * * * *" {
		t.Fatalf("moved: %+v, next %v", moved, moved.NextRunAt)
	}
	putSchedule(t, s, schedParams("a-first", "@every 5m"))
	all := ok(s.ListSchedules(ctx)).must(t)
	if len(all) != 2 || all[0].Name != "a-first" || all[1].Name != "hourly" {
		t.Fatalf("list: %v", all)
	}
	// Pause and resume.
	paused := ok(s.PauseSchedule(ctx, "hourly", true)).must(t)
	if !paused.Paused || paused.NextRunAt != nil {
		t.Fatalf("paused: %+v", paused)
	}
	if due := ok(s.DueSchedules(ctx, time.Now().Add(48*time.Hour), 10)).must(t); len(due) != 1 || due[0].Name != "a-first" {
		t.Fatalf("due while hourly is paused: %v", due)
	}
	p.Paused = nil
	if kept, _ := putSchedule(t, s, p); !kept.Paused {
		t.Fatal("a put without paused resumed the schedule")
	}
	resumed := ok(s.PauseSchedule(ctx, "hourly", false)).must(t)
	if resumed.Paused || resumed.NextRunAt == nil || !resumed.NextRunAt.After(time.Now()) {
		t.Fatalf("resumed: %+v", resumed)
	}
	// Delete.
	if err := s.DeleteSchedule(ctx, "hourly"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSchedule(ctx, "hourly"); !errors.Is(err, readpast.ErrScheduleNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := s.DeleteSchedule(ctx, "hourly"); !errors.Is(err, readpast.ErrScheduleNotFound) {
		t.Fatalf("delete again: %v", err)
	}
	if _, err := s.PauseSchedule(ctx, "nope", true); !errors.Is(err, readpast.ErrScheduleNotFound) {
		t.Fatalf("pause unknown: %v", err)
	}
	// Bad input names its field and stores nothing.
	for field, p := range map[string]readpast.ScheduleParams{
		"name":       {Cron: "@hourly", Job: readpast.EnqueueParams{Kind: "k"}},
		"cron":       {Name: "bad", Cron: "61 * * * *", Job: readpast.EnqueueParams{Kind: "k"}},
		"time_zone":  {Name: "bad", Cron: "@hourly", TimeZone: "Mars/Olympus", Job: readpast.EnqueueParams{Kind: "k"}},
		"job.kind":   {Name: "bad", Cron: "@hourly"},
		"job.run_at": {Name: "bad", Cron: "@hourly", Job: readpast.EnqueueParams{Kind: "k", RunAt: time.Now()}},
		"catch_up":   {Name: "bad", Cron: "@hourly", CatchUp: "all", Job: readpast.EnqueueParams{Kind: "k"}},
	} {
		_, _, err := s.PutSchedule(ctx, p)
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("put %+v: %v, want a FieldError for %s", p, err, field)
		}
	}
	if n := len(ok(s.ListSchedules(ctx)).must(t)); n != 1 {
		t.Fatalf("%d schedules after bad puts, want 1", n)
	}
}

func testScheduleFireOnce(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	p := schedParams("g", "@every 1s")
	p.Job.Group = "sg"
	sc, _ := putSchedule(t, s, p)
	tick := *sc.NextRunAt
	next := tick.Add(time.Second)
	f := readpast.Firing{Name: "g", Version: sc.Version, Expect: tick, Tick: &tick, Next: &next}
	fired, job, err := s.FireSchedule(ctx, f)
	if err != nil || !fired || job == nil || job.Kind != "tick" || job.Group == nil || *job.Group != "sg" || !job.RunAt.Equal(tick) {
		t.Fatalf("fire: %v %+v %v", fired, job, err)
	}
	// The same tick again, and a firing of an older version, do nothing.
	if fired, job, err := s.FireSchedule(ctx, f); err != nil || fired || job != nil {
		t.Fatalf("fire the same tick again: %v %+v %v", fired, job, err)
	}
	f2 := readpast.Firing{Name: "g", Version: sc.Version - 1, Expect: next, Tick: &next, Next: &next}
	if fired, _, err := s.FireSchedule(ctx, f2); err != nil || fired {
		t.Fatalf("fire with a stale version: %v %v", fired, err)
	}
	after := ok(s.GetSchedule(ctx, "g")).must(t)
	if !after.NextRunAt.Equal(next) || after.LastRunAt == nil || !after.LastRunAt.Equal(tick) || after.LastJobID == nil || *after.LastJobID != job.ID {
		t.Fatalf("schedule after firing: %+v", after)
	}
	runs := ok(s.ScheduleRuns(ctx, "g", 10)).must(t)
	if len(runs) != 1 || runs[0].JobID != job.ID || !runs[0].Tick.Equal(tick) {
		t.Fatalf("runs: %+v", runs)
	}
	// The tick's job is claimable like any grouped job (it has its mark)
	// once its tick has come.
	time.Sleep(time.Until(tick) + 10*time.Millisecond)
	if c := claim(t, s, 10, time.Minute); len(c) != 1 || c[0].ID != job.ID {
		t.Fatalf("claimed %v, want the tick's job %d", ids(c), job.ID)
	}
	// A skip firing moves the next tick and makes no job.
	later := next.Add(5 * time.Hour)
	if fired, job, err := s.FireSchedule(ctx, readpast.Firing{Name: "g", Version: sc.Version, Expect: next, Next: &later}); err != nil || !fired || job != nil {
		t.Fatalf("skip: %v %+v %v", fired, job, err)
	}
	if got := ok(s.GetSchedule(ctx, "g")).must(t); !got.NextRunAt.Equal(later) || *got.LastJobID != *after.LastJobID {
		t.Fatalf("after skip: %+v", got)
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// testSchedulersExactlyOncePerTick: several schedulers on one store, each
// in its goroutine, race for every tick of a schedule over many ticks of
// a fake clock: exactly one job per tick, none skipped.
func testSchedulersExactlyOncePerTick(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	sc, _ := putSchedule(t, s, schedParams("every-minute", "* * * * *"))
	start := *sc.NextRunAt
	clock := &fakeClock{t: start}
	const schedulers, ticks = 6, 40
	scheds := make([]*readpast.Scheduler, schedulers)
	for i := range scheds {
		scheds[i] = readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now})
	}
	made := 0
	for k := range ticks {
		// Sometimes the clock is a little past the tick, as a late
		// scheduler finds it; never a whole tick.
		clock.set(start.Add(time.Duration(k)*time.Minute + time.Duration(k%3)*time.Second))
		var wg sync.WaitGroup
		counts := make([]int, schedulers)
		errs := make([]error, schedulers)
		for i, sch := range scheds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i], errs[i] = sch.Tick(ctx)
			}()
		}
		wg.Wait()
		n := 0
		for i := range scheds {
			if errs[i] != nil {
				t.Fatalf("scheduler %d: %v", i, errs[i])
			}
			n += counts[i]
		}
		if n != 1 {
			t.Fatalf("tick %d: %d jobs made by %d schedulers, want 1", k, n, schedulers)
		}
		made += n
	}
	runs := ok(s.ScheduleRuns(ctx, "every-minute", 1000)).must(t)
	if len(runs) != ticks || made != ticks || countKind(t, s, "tick") != ticks {
		t.Fatalf("%d runs, %d made, %d jobs for %d ticks", len(runs), made, countKind(t, s, "tick"), ticks)
	}
	for i, r := range runs { // newest first
		want := start.Add(time.Duration(ticks-1-i) * time.Minute)
		if !r.Tick.Equal(want) {
			t.Fatalf("run %d: tick %v, want %v", i, r.Tick, want)
		}
		if j := get(t, s, r.JobID); !j.RunAt.Equal(r.Tick) {
			t.Fatalf("job %d runs at %v, its tick is %v", j.ID, j.RunAt, r.Tick)
		}
	}
}

// testScheduleCatchUp: a scheduler that comes back after missing many
// ticks makes no burst: nothing for them (skip) or one job (once).
func testScheduleCatchUp(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for _, policy := range []readpast.CatchUp{readpast.CatchUpSkip, readpast.CatchUpOnce} {
		p := schedParams("cu-"+string(policy), "* * * * *")
		p.CatchUp = policy
		p.Job.Kind = "cu-" + string(policy)
		sc, _ := putSchedule(t, s, p)
		start := *sc.NextRunAt
		clock := &fakeClock{t: start.Add(-time.Second)}
		sch := readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now})
		if n := ok(sch.Tick(ctx)).must(t); n != 0 {
			t.Fatalf("%s: %d jobs before the first tick", policy, n)
		}
		// Down for an hour: 60 ticks missed.
		back := start.Add(time.Hour + 30*time.Second)
		clock.set(back)
		n := ok(sch.Tick(ctx)).must(t)
		want := map[readpast.CatchUp]int{readpast.CatchUpSkip: 0, readpast.CatchUpOnce: 1}[policy]
		if n != want || countKind(t, s, p.Job.Kind) != want {
			t.Fatalf("%s: %d jobs after an hour down, want %d", policy, n, want)
		}
		got := ok(s.GetSchedule(ctx, p.Name)).must(t)
		if wantNext := start.Add(61 * time.Minute); !got.NextRunAt.Equal(wantNext) {
			t.Fatalf("%s: next %v, want %v", policy, got.NextRunAt, wantNext)
		}
		if policy == readpast.CatchUpOnce {
			runs := ok(s.ScheduleRuns(ctx, p.Name, 10)).must(t)
			if len(runs) != 1 || !runs[0].CatchUp || !runs[0].Tick.Equal(start) {
				t.Fatalf("once: runs %+v", runs)
			}
		}
		// From there, every tick again.
		clock.set(start.Add(61 * time.Minute))
		if n := ok(sch.Tick(ctx)).must(t); n != 1 {
			t.Fatalf("%s: %d jobs at the first tick after coming back", policy, n)
		}
	}
}

// testSchedulerRuns: schedulers running in goroutines with the real clock
// and an "@every 1s" schedule make one job a second.
func testSchedulerRuns(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx, cancel := context.WithCancel(ctxT(t))
	putSchedule(t, s, schedParams("second", "@every 1s"))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readpast.RunScheduler(ctx, s, 50*time.Millisecond, discardLogger())
		}()
	}
	time.Sleep(3500 * time.Millisecond)
	cancel()
	wg.Wait()
	runs := ok(s.ScheduleRuns(ctxT(t), "second", 100)).must(t)
	if len(runs) < 3 || len(runs) > 4 {
		t.Fatalf("%d runs in 3.5 s of an @every 1s schedule", len(runs))
	}
	for i := 1; i < len(runs); i++ {
		if d := runs[i-1].Tick.Sub(runs[i].Tick); d != time.Second {
			t.Fatalf("ticks %v and %v are %v apart", runs[i].Tick, runs[i-1].Tick, d)
		}
	}
	if n := countKind(t, s, "tick"); n != len(runs) {
		t.Fatalf("%d jobs for %d runs", n, len(runs))
	}
}

// testSchedulersAcrossDST: schedulers driven by a fake clock through the
// daylight saving changes of America/New_York in 2026 make the ticks the
// parser documents: the 02:30 that does not exist on March 8 makes none,
// the 01:30 that happens twice on November 1 makes two.
func testSchedulersAcrossDST(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for _, c := range []struct {
		cron, from, to string
		want           []string
	}{
		{"30 2 * * *", "2026-03-07T00:00:00Z", "2026-03-09T12:00:00Z", []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"}},
		{"30 1 * * *", "2026-10-31T00:00:00Z", "2026-11-02T12:00:00Z", []string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
	} {
		name := "dst-" + c.from[:10]
		p := schedParams(name, c.cron)
		p.TimeZone = "America/New_York"
		p.Job.Kind = name
		sc, _ := putSchedule(t, s, p)
		from, _ := time.Parse(time.RFC3339, c.from)
		to, _ := time.Parse(time.RFC3339, c.to)
		cs, err := readpast.ParseCron(sc.Cron, sc.TimeZone)
		if err != nil {
			t.Fatal(err)
		}
		// Move the schedule's next tick back to the window (a skip firing).
		first := cs.Next(from)
		if fired, _, err := s.FireSchedule(ctx, readpast.Firing{Name: name, Version: sc.Version, Expect: *sc.NextRunAt, Next: &first}); err != nil || !fired {
			t.Fatalf("move the next tick: %v %v", fired, err)
		}
		clock := &fakeClock{t: from}
		scheds := []*readpast.Scheduler{
			readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now}),
			readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now}),
			readpast.NewScheduler(s, readpast.SchedulerConfig{Now: clock.now}),
		}
		for now := from; !now.After(to); now = now.Add(15 * time.Minute) {
			clock.set(now)
			var wg sync.WaitGroup
			for _, sch := range scheds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := sch.Tick(ctx); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		runs := ok(s.ScheduleRuns(ctx, name, 100)).must(t)
		var got []string
		for i := len(runs) - 1; i >= 0; i-- {
			got = append(got, runs[i].Tick.Format(time.RFC3339))
		}
		if len(got) != len(c.want) || countKind(t, s, name) != len(c.want) {
			t.Fatalf("%s %s: ticks %v (%d jobs), want %v", c.cron, name, got, countKind(t, s, name), c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s %s: ticks %v, want %v", c.cron, name, got, c.want)
			}
		}
	}
}
