package readpast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// DefaultScheduleInterval is how often a scheduler looks for due ticks.
// A tick is enqueued at most this long after its time.
const DefaultScheduleInterval = time.Second

// dueBatch bounds the schedules one look fires.
const dueBatch = 100

// SchedulerConfig configures a Scheduler. Zero fields take defaults.
type SchedulerConfig struct {
	// Interval between looks for due ticks; DefaultScheduleInterval.
	Interval time.Duration
	// Now is the scheduler's clock; time.Now by default. Ticks fire by
	// the clock of the scheduler that gets to them first: keep the clocks
	// of the hosts that run schedulers in sync.
	Now func() time.Time
	// Logger defaults to one that discards.
	Logger *slog.Logger
}

// Scheduler enqueues the jobs of the schedules stored in a Store, one per
// tick. Any number of schedulers may run at once, in any number of
// processes, with no leader: each tick is fired by one conditional update
// of its schedule's row (Store.FireSchedule), so exactly one job is made
// per tick, and as long as one scheduler runs no tick is missed. Every
// started Client runs one (Config.ScheduleInterval), and so does
// `readpast serve`.
type Scheduler struct {
	store    Store
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
	parsed   map[string]*CronSchedule // by cron and time zone
	failures atomic.Int64
}

// NewScheduler makes a scheduler on store.
func NewScheduler(store Store, cfg SchedulerConfig) *Scheduler {
	s := &Scheduler{store: store, interval: cfg.Interval, now: cfg.Now, log: cfg.Logger, parsed: map[string]*CronSchedule{}}
	if s.interval <= 0 {
		s.interval = DefaultScheduleInterval
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Run fires due ticks every interval until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		_, _ = s.Tick(ctx) // it logs its failures
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Failures returns how many fires of a schedule failed (the store's
// FireSchedule returned an error, or the schedule's expression or time
// zone did not parse here) since the scheduler was made. Each is also
// logged at level Warn.
func (s *Scheduler) Failures() int64 { return s.failures.Load() }

// Tick fires every tick due now, as CatchUp describes, and returns how many
// jobs it enqueued. Ticks another scheduler fired meanwhile are left to
// it. Each schedule fires on its own: one whose fire fails is logged,
// counted (Failures) and left for the next look, and the others still
// fire; the error returned joins the failures.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	made := 0
	var errs []error
	failed := map[string]bool{} // fired no more in this look
	// A schedule whose next tick is due again after a firing (it was
	// late) is fired again in the next round; the rounds are bounded.
	for round := 0; round < 10; round++ {
		now := s.now()
		due, err := s.store.DueSchedules(ctx, now, dueBatch+len(failed))
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "scheduler: due schedules not read", slog.Any("error", err))
			}
			return made, errors.Join(append(errs, err)...)
		}
		tried := 0
		for _, sc := range due {
			if sc.NextRunAt == nil || failed[sc.Name] {
				continue // not due (the store returned it by mistake), or failed in this look
			}
			tried++
			c, err := s.cron(sc)
			if err != nil {
				// Say, a time zone this host's tzdata does not know.
				failed[sc.Name] = true
				s.failures.Add(1)
				s.log.WarnContext(ctx, "schedule does not parse; not fired", slog.String("schedule", sc.Name), slog.Any("error", err))
				errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
				continue
			}
			f := plan(sc, c, now)
			fired, job, err := s.store.FireSchedule(ctx, f)
			if err != nil {
				if ctx.Err() != nil {
					return made, errors.Join(append(errs, err)...)
				}
				failed[sc.Name] = true
				s.failures.Add(1)
				s.log.WarnContext(ctx, "schedule not fired", slog.String("schedule", sc.Name),
					slog.Time("tick", f.Expect), slog.Any("error", err))
				errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
				continue
			}
			switch {
			case !fired:
				// Another scheduler got there first, or the schedule changed.
			case job != nil:
				made++
				s.log.DebugContext(ctx, "schedule fired", slog.String("schedule", sc.Name),
					slog.Time("tick", *f.Tick), slog.Int64("job", job.ID), slog.Bool("catch_up", f.CatchUp))
			case f.Tick != nil || (sc.LastRunAt != nil && !f.Expect.After(*sc.LastRunAt)):
				s.log.InfoContext(ctx, "tick fired already; schedule moved on", slog.String("schedule", sc.Name),
					slog.Time("tick", f.Expect), slog.Any("next", f.Next))
			default:
				s.log.InfoContext(ctx, "missed ticks skipped", slog.String("schedule", sc.Name),
					slog.Time("from", f.Expect), slog.Any("next", f.Next))
			}
		}
		if tried == 0 {
			break
		}
	}
	return made, errors.Join(errs...)
}

func (s *Scheduler) cron(sc *Schedule) (*CronSchedule, error) {
	k := sc.Cron + "\x00" + sc.TimeZone
	if c, ok := s.parsed[k]; ok {
		return c, nil
	}
	c, err := ParseCron(sc.Cron, sc.TimeZone)
	if err != nil {
		return nil, err
	}
	if len(s.parsed) > 10000 {
		clear(s.parsed)
	}
	s.parsed[k] = c
	return c, nil
}

// RunScheduler runs a Scheduler on store until ctx ends.
func RunScheduler(ctx context.Context, store Store, interval time.Duration, log *slog.Logger) {
	NewScheduler(store, SchedulerConfig{Interval: interval, Logger: log}).Run(ctx)
}

// SyncSchedules puts every schedule of ps (see Store.PutSchedule): what a
// Client does at Start with Config.Schedules. Schedules not in ps are
// left alone, and so is a paused schedule's state unless p.Paused says.
func SyncSchedules(ctx context.Context, store Store, ps []ScheduleParams) error {
	for _, p := range ps {
		if _, _, err := store.PutSchedule(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
