package readpast

import (
	"errors"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, tz string) *CronSchedule {
	t.Helper()
	c, err := ParseCron(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseCron(t *testing.T) {
	for _, ok := range []string{"* * * * *", "*/5 * * * * *", "0 9 * * MON-FRI", "@every 5m", "@hourly", "@daily", "0 0 1 1 *"} {
		if _, err := ParseCron(ok, ""); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for expr, field := range map[string]string{
		"":                               "cron",
		"61 * * * *":                     "cron",
		"* * *":                          "cron",
		"@every 1x":                      "cron",
		"CRON_TZ=Europe/Paris 0 * * * *": "cron",
		"0 0 30 2 *":                     "cron", // never fires
		"@every 0s":                      "cron", // would tick every second
		"@every -5m":                     "cron",
		"@every 1ms":                     "cron",
		"@every 1500ms":                  "cron", // would tick every second
		"@every 1m0.5s":                  "cron", // would tick every minute
		"@every 1000000h":                "cron", // its first tick is past five years: never fires
	} {
		_, err := ParseCron(expr, "")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%q: %v, want a FieldError for %s", expr, err, field)
		}
	}
	for _, tz := range []string{"Mars/Olympus", "Local", "../../etc/passwd", "Europe Paris"} {
		_, err := ParseCron("@hourly", tz)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "time_zone" {
			t.Errorf("time zone %q: %v", tz, err)
		}
	}
}

// TestCronTimeZonesAndDST pins the parser's documented behaviour
// (github.com/robfig/cron/v3, "Time zones"): ticks are read in the
// schedule's zone; a tick in the hour skipped when clocks go forward does
// not happen that day; a tick in the hour that repeats when clocks go back
// happens at both instants.
func TestCronTimeZonesAndDST(t *testing.T) {
	cases := []struct {
		name, expr, tz, from string
		want                 []string // successive ticks, in UTC
	}{
		{"Paris 09:00 is 08:00 UTC in winter, 07:00 UTC in summer", "0 9 * * *", "Europe/Paris", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"}},
		{"New York 02:30 does not exist on 2026-03-08: skipped that day", "30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"}},
		{"New York 01:30 happens twice on 2026-11-01: two ticks", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"hourly across the fall-back hour: every instant once", "0 * * * *", "America/New_York", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		{"@every is a fixed interval, whatever the zone", "@every 90m", "America/New_York", "2026-11-01T04:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"}},
		{"six fields: seconds first", "*/20 * * * * *", "", "2026-01-01T00:00:05Z",
			[]string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"}},
		{"Kolkata is UTC+05:30", "0 0 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T18:30:00Z", "2026-01-02T18:30:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustParse(t, c.expr, c.tz)
			cur := at(t, c.from)
			for _, w := range c.want {
				cur = s.Next(cur)
				if !cur.Equal(at(t, w)) || cur.Location() != time.UTC {
					t.Fatalf("next tick %v, want %s", cur, w)
				}
			}
		})
	}
}

func TestPlan(t *testing.T) {
	c := mustParse(t, "0 * * * *", "")
	n := at(t, "2026-01-01T10:00:00Z")
	sc := func(policy CatchUp) *Schedule {
		return &Schedule{Name: "s", Version: 3, NextRunAt: &n, CatchUp: policy}
	}
	for _, k := range []struct {
		name    string
		policy  CatchUp
		now     string
		tick    string // "" for none
		catchUp bool
		next    string
	}{
		{"on time", CatchUpSkip, "2026-01-01T10:00:00.2Z", "2026-01-01T10:00:00Z", false, "2026-01-01T11:00:00Z"},
		{"late by less than an interval", CatchUpSkip, "2026-01-01T10:59:00Z", "2026-01-01T10:00:00Z", false, "2026-01-01T11:00:00Z"},
		{"late past the next tick, within the grace", CatchUpSkip, "2026-01-01T11:00:30Z", "2026-01-01T10:00:00Z", false, "2026-01-01T11:00:00Z"},
		{"missed: skip", CatchUpSkip, "2026-01-01T11:01:00Z", "", false, "2026-01-01T12:00:00Z"},
		{"missed many: skip", CatchUpSkip, "2026-01-03T07:15:00Z", "", false, "2026-01-03T08:00:00Z"},
		{"missed many: once", CatchUpOnce, "2026-01-03T07:15:00Z", "2026-01-01T10:00:00Z", true, "2026-01-03T08:00:00Z"},
	} {
		t.Run(k.name, func(t *testing.T) {
			f := plan(sc(k.policy), c, at(t, k.now))
			if f.Name != "s" || f.Version != 3 || !f.Expect.Equal(n) || f.CatchUp != k.catchUp {
				t.Fatalf("firing %+v", f)
			}
			if (f.Tick == nil) != (k.tick == "") || (f.Tick != nil && !f.Tick.Equal(at(t, k.tick))) {
				t.Fatalf("tick %v, want %q", f.Tick, k.tick)
			}
			if f.Next == nil || !f.Next.Equal(at(t, k.next)) {
				t.Fatalf("next %v, want %s", f.Next, k.next)
			}
		})
	}
	// A one-second schedule: the grace is one interval.
	e := mustParse(t, "@every 1s", "")
	s := &Schedule{NextRunAt: &n}
	if f := plan(s, e, n.Add(1900*time.Millisecond)); f.Tick == nil {
		t.Fatal("a scheduler 1.9 s late on a 1 s schedule skipped the tick")
	}
	if f := plan(s, e, n.Add(2*time.Second)); f.Tick != nil {
		t.Fatal("a tick 2 s late on a 1 s schedule was not counted missed")
	}
}

// TestPlanAfterAFiredTick: a next tick at or before the last fired one
// (the wedged state a put or resume racing a scheduler could leave) is
// never planned again: the plan starts after the last fired tick. Before,
// plan fired the next tick again, and the store's run table refused it
// (with catch_up once forever).
func TestPlanAfterAFiredTick(t *testing.T) {
	c := mustParse(t, "0 * * * *", "")
	n := at(t, "2026-01-01T10:00:00Z")
	for _, k := range []struct {
		name    string
		policy  CatchUp
		last    string
		now     string
		tick    string // "" for none
		catchUp bool
		next    string
	}{
		{"the fired tick, next not due", CatchUpSkip, "2026-01-01T10:00:00Z", "2026-01-01T10:00:01Z", "", false, "2026-01-01T11:00:00Z"},
		{"ticks behind, next not due", CatchUpOnce, "2026-01-01T12:00:00Z", "2026-01-01T12:00:30Z", "", false, "2026-01-01T13:00:00Z"},
		{"the one after is on time", CatchUpSkip, "2026-01-01T10:00:00Z", "2026-01-01T11:00:10Z", "2026-01-01T11:00:00Z", false, "2026-01-01T12:00:00Z"},
		{"missed after it: skip", CatchUpSkip, "2026-01-01T10:00:00Z", "2026-01-03T07:15:00Z", "", false, "2026-01-03T08:00:00Z"},
		{"missed after it: once", CatchUpOnce, "2026-01-01T10:00:00Z", "2026-01-03T07:15:00Z", "2026-01-01T11:00:00Z", true, "2026-01-03T08:00:00Z"},
	} {
		t.Run(k.name, func(t *testing.T) {
			last := at(t, k.last)
			s := &Schedule{Name: "s", Version: 3, NextRunAt: &n, LastRunAt: &last, CatchUp: k.policy}
			f := plan(s, c, at(t, k.now))
			if !f.Expect.Equal(n) || f.CatchUp != k.catchUp {
				t.Fatalf("firing %+v", f)
			}
			if (f.Tick == nil) != (k.tick == "") || (f.Tick != nil && !f.Tick.Equal(at(t, k.tick))) {
				t.Fatalf("tick %v, want %q", f.Tick, k.tick)
			}
			if f.Next == nil || !f.Next.Equal(at(t, k.next)) {
				t.Fatalf("next %v, want %s", f.Next, k.next)
			}
		})
	}
}

func TestScheduleParamsNormalize(t *testing.T) {
	p, c, err := ScheduleParams{Name: "n", Cron: " @daily ", Job: EnqueueParams{Kind: "k"}}.Normalize(time.Now())
	if err != nil || c == nil || p.Cron != "@daily" || p.TimeZone != "UTC" || p.CatchUp != CatchUpSkip ||
		p.Job.Queue != DefaultQueue || !p.Job.RunAt.IsZero() {
		t.Fatalf("%+v %v", p, err)
	}
	_, _, err = ScheduleParams{Name: "n", Cron: "@daily", Job: EnqueueParams{Kind: "k", Priority: 5000}}.Normalize(time.Now())
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "job.priority" {
		t.Fatalf("%v", err)
	}
	// A tick's job starts a trace of its own: a creation context given
	// here would be dropped, so it is refused.
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, _, err = ScheduleParams{Name: "n", Cron: "@daily", Job: EnqueueParams{Kind: "k", Traceparent: tp}}.Normalize(time.Now())
	if !errors.As(err, &fe) || fe.Field != "job.traceparent" {
		t.Fatalf("a schedule's job with a traceparent: %v", err)
	}
}
