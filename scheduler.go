package readpast

import (
	"context"
	"log/slog"
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
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "scheduler", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick fires every tick due now, as Plan decides, and returns how many
// jobs it enqueued. Ticks another scheduler fired meanwhile are left to
// it.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	made := 0
	// A schedule whose next tick is due again after a firing (it was
	// late) is fired again in the next round; the rounds are bounded.
	for round := 0; round < 10; round++ {
		now := s.now()
		due, err := s.store.DueSchedules(ctx, now, dueBatch)
		if err != nil {
			return made, err
		}
		if len(due) == 0 {
			return made, nil
		}
		for _, sc := range due {
			if sc.NextRunAt == nil {
				continue // not due: the store returned it by mistake
			}
			c, err := s.cron(sc)
			if err != nil {
				s.log.WarnContext(ctx, "schedule does not parse; not fired", slog.String("schedule", sc.Name), slog.Any("error", err))
				continue
			}
			f := Plan(sc, c, now)
			fired, job, err := s.store.FireSchedule(ctx, f)
			if err != nil {
				return made, err
			}
			switch {
			case !fired:
				// Another scheduler got there first, or the schedule changed.
			case job != nil:
				made++
				s.log.DebugContext(ctx, "schedule fired", slog.String("schedule", sc.Name),
					slog.Time("tick", *f.Tick), slog.Int64("job", job.ID), slog.Bool("catch_up", f.CatchUp))
			default:
				s.log.InfoContext(ctx, "missed ticks skipped", slog.String("schedule", sc.Name),
					slog.Time("from", f.Expect), slog.Any("next", f.Next))
			}
		}
	}
	return made, nil
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
