package readpast

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // time zones work on machines without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// CatchUp says what a scheduler does with the ticks of a schedule that no
// scheduler enqueued in time (all were down). A tick is on time while the
// scheduler looks before the tick after it plus a grace of the shorter of
// one interval and one minute: a scheduler late by less than that still
// makes every tick, and one that comes back after any outage enqueues at
// most one job for the ticks it missed (plus the ticks of the last
// interval), never a burst.
type CatchUp string

// The catch-up policies.
const (
	// CatchUpSkip enqueues nothing for missed ticks: the schedule goes on
	// from its next tick after now. The default.
	CatchUpSkip CatchUp = "skip"
	// CatchUpOnce enqueues one job for all the missed ticks together (its
	// tick is the first missed one), then goes on from the next tick after
	// now.
	CatchUpOnce CatchUp = "once"
)

// ScheduleParams declares a periodic job: every tick of Cron, one job made
// from Job is enqueued, exactly once whatever the number of schedulers.
type ScheduleParams struct {
	// Name identifies the schedule (1 to MaxNameLen printable characters,
	// no spaces). Required.
	Name string
	// Cron is when the schedule ticks: five fields (minute hour
	// day-of-month month day-of-week), or six with seconds first, or a
	// descriptor (@hourly, @daily, @weekly, @monthly, @yearly, @every 5m).
	// Parsed by github.com/robfig/cron/v3; an @every of less than a
	// second, or not of whole seconds, is refused. Required.
	Cron string
	// TimeZone is the IANA time zone the fields are read in (Europe/Paris).
	// Defaults to UTC. At a daylight saving change, a tick in the hour
	// that is skipped does not happen, and a tick in the hour that repeats
	// happens twice (once per instant): the parser's documented behaviour.
	TimeZone string
	// Job is what each tick enqueues: Kind (required), Queue, Payload,
	// Priority, Group and MaxAttempts. RunAt, UniqueKey and UniqueFor must
	// be zero: a tick's job runs at its tick.
	Job EnqueueParams
	// CatchUp is the policy for missed ticks; defaults to CatchUpSkip.
	CatchUp CatchUp
	// Paused, when set, pauses or resumes the schedule; nil keeps a stored
	// schedule's state (a new one starts running).
	Paused *bool
}

// Schedule is a stored schedule.
type Schedule struct {
	Name     string        `json:"name"`
	Cron     string        `json:"cron"`
	TimeZone string        `json:"time_zone"`
	Job      EnqueueParams `json:"-"`
	CatchUp  CatchUp       `json:"catch_up"`
	Paused   bool          `json:"paused"`
	// NextRunAt is the next tick a scheduler will enqueue; nil while
	// paused, or when the expression never fires again.
	NextRunAt *time.Time `json:"next_run_at"`
	// LastRunAt is the tick of the last job the schedule made, and
	// LastJobID that job.
	LastRunAt *time.Time `json:"last_run_at"`
	LastJobID *int64     `json:"last_job_id"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	// Version changes with every change of the schedule's definition or
	// state by a person (put, pause, resume), not with its ticks.
	// Schedulers fire a tick only if it did not change since they read it.
	Version int64 `json:"-"`
}

// ScheduleRun is one tick of a schedule and the job it made.
type ScheduleRun struct {
	Tick  time.Time `json:"tick"`
	JobID int64     `json:"job_id"`
	// CatchUp is true for the one job of CatchUpOnce that stands for
	// several missed ticks.
	CatchUp   bool      `json:"catch_up,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// ScheduleRunsKept is how many of a schedule's latest runs the stores keep.
const ScheduleRunsKept = 100

// cronParser reads 5 fields, or 6 with seconds first, and descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CronSchedule is a parsed cron expression in its time zone.
type CronSchedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// ParseCron parses expr (see ScheduleParams.Cron) for time zone tz ("" is
// UTC). Errors are *FieldError for "cron" or "time_zone".
func ParseCron(expr, tz string) (*CronSchedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, invalid("cron", "is required")
	}
	if len(expr) > 256 {
		return nil, invalid("cron", "longer than 256 bytes")
	}
	if f := strings.Fields(expr)[0]; strings.HasPrefix(f, "TZ=") || strings.HasPrefix(f, "CRON_TZ=") {
		return nil, invalid("cron", "give the time zone as time_zone, not in the expression")
	}
	loc := time.UTC
	if tz != "" && tz != "UTC" {
		var err error
		if strings.ContainsAny(tz, " \\") || len(tz) > 64 {
			return nil, invalid("time_zone", "unknown time zone %q", tz)
		}
		if loc, err = time.LoadLocation(tz); err != nil || tz == "Local" {
			return nil, invalid("time_zone", "unknown time zone %q (want an IANA name such as Europe/Paris)", tz)
		}
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, invalid("cron", "%v", err)
	}
	// The parser rounds an @every of less than a second, zero or negative
	// included, up to a second (a typo would tick every second), and cuts
	// the fraction of a second off a longer one (1500ms would tick every
	// second).
	if every, ok := strings.CutPrefix(expr, "@every "); ok {
		if d, err := time.ParseDuration(strings.TrimSpace(every)); err == nil {
			switch {
			case d < time.Second:
				return nil, invalid("cron", "@every needs an interval of at least 1s, not %s", strings.TrimSpace(every))
			case d%time.Second != 0:
				return nil, invalid("cron", "@every takes whole seconds, not %s", strings.TrimSpace(every))
			}
		}
	}
	c := &CronSchedule{sched: s, loc: loc}
	if c.Next(time.Now()).IsZero() {
		return nil, invalid("cron", "never fires")
	}
	return c, nil
}

// Next returns the first tick strictly after t, in UTC; zero when there
// is none within five years.
func (c *CronSchedule) Next(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() || n.After(t.AddDate(5, 0, 0)) { // @every can reach past them
		return time.Time{}
	}
	return n.UTC()
}

// Normalize fills defaults into p and checks every field; the error is a
// *FieldError naming the field ("job.kind" for the job's).
func (p ScheduleParams) Normalize(now time.Time) (ScheduleParams, *CronSchedule, error) {
	if err := checkName("name", p.Name, true); err != nil {
		return p, nil, err
	}
	p.Cron = strings.TrimSpace(p.Cron)
	p.TimeZone = cmp.Or(p.TimeZone, "UTC")
	c, err := ParseCron(p.Cron, p.TimeZone)
	if err != nil {
		return p, nil, err
	}
	switch p.CatchUp {
	case "":
		p.CatchUp = CatchUpSkip
	case CatchUpSkip, CatchUpOnce:
	default:
		return p, nil, invalid("catch_up", "must be skip or once")
	}
	switch {
	case !p.Job.RunAt.IsZero():
		return p, nil, invalid("job.run_at", "a tick's job runs at its tick; leave it out")
	case p.Job.UniqueKey != "" || p.Job.UniqueFor != 0:
		return p, nil, invalid("job.unique_key", "each tick makes exactly one job already; leave it out")
	case len(p.Job.Tags) > 0:
		return p, nil, invalid("job.tags", "schedules do not tag their jobs; leave it out")
	case len(p.Job.Keys) > 1:
		return p, nil, invalid("job.keys", "a schedule's job takes one key (its group); leave the others out")
	case p.Job.Traceparent != "" || p.Job.Tracestate != "":
		return p, nil, invalid("job.traceparent", "a tick's job has no creation context of its own; leave it out")
	}
	j, err := p.Job.Normalize(now)
	if err != nil {
		return p, nil, prefixField("job.", err)
	}
	j.RunAt = time.Time{}
	j.Keys = nil // the group is the key
	p.Job = j
	return p, c, nil
}

// Firing is what a scheduler asks a store to do for one due schedule: if
// the schedule is still at Version with its next tick at Expect, enqueue
// one job for Tick (none when Tick is nil: missed ticks skipped) and move
// the next tick to Next (nil: it never fires again).
type Firing struct {
	Name    string
	Version int64
	Expect  time.Time
	Tick    *time.Time
	// CatchUp marks a job that stands for several missed ticks.
	CatchUp bool
	Next    *time.Time
}

// plan decides what a scheduler does at now with schedule s, whose next
// tick N (s.NextRunAt, which must be set) is due (N <= now), per its
// catch-up policy:
//
//   - N is on time when now is before the tick after it, N', plus a grace
//     of min(N' - N, 1 minute): N is enqueued and the next tick becomes
//     N' (which, if due too, the scheduler fires next). A scheduler late
//     by less than one interval thus still makes every tick.
//   - Otherwise N and the ticks after it up to now were missed: with
//     CatchUpSkip nothing is enqueued; with CatchUpOnce one job is, for
//     tick N. The next tick becomes the first one after now.
//
// So a scheduler that comes back after any outage enqueues at most one
// job (plus the ticks of the last interval): never a burst.
//
// A tick fires once: when N is at or before the last tick that fired
// (s.LastRunAt: a put or resume that raced a scheduler could once set the
// next tick back to it), N stands for the first tick after the last fired
// one instead, and when that is not due yet the firing only moves the next
// tick to it. The store checks it again (Store.FireSchedule).
func plan(s *Schedule, c *CronSchedule, now time.Time) Firing {
	n := s.NextRunAt.UTC()
	f := Firing{Name: s.Name, Version: s.Version, Expect: n}
	if s.LastRunAt != nil && !n.After(*s.LastRunAt) {
		if n = c.Next(*s.LastRunAt); n.IsZero() {
			return f // no tick after the last fired one
		}
		if n.After(now) {
			f.Next = &n
			return f
		}
	}
	next := c.Next(n)
	if next.IsZero() || now.Before(next.Add(min(next.Sub(n), time.Minute))) {
		f.Tick = &n
		if !next.IsZero() {
			f.Next = &next
		}
		return f
	}
	if s.CatchUp == CatchUpOnce {
		f.Tick, f.CatchUp = &n, true
	}
	if after := c.Next(now); !after.IsZero() {
		f.Next = &after
	}
	return f
}

// String names the schedule in logs.
func (s *Schedule) String() string {
	return fmt.Sprintf("schedule %s (%s %s)", s.Name, s.Cron, s.TimeZone)
}

// NextAfter returns the first tick of s after now, nil when there is none
// (or s's expression no longer parses).
func (s *Schedule) NextAfter(now time.Time) *time.Time {
	c, err := ParseCron(s.Cron, s.TimeZone)
	if err != nil {
		return nil
	}
	if n := c.Next(now); !n.IsZero() {
		return &n
	}
	return nil
}
