package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// scanSchedule reads the columns of sql/schedule_get.sql, then extra.
func scanSchedule(r scanner, extra ...any) (*readpast.Schedule, error) {
	var (
		sc      readpast.Schedule
		payload []byte
		group   *string
		catchUp string
	)
	err := r.Scan(append([]any{&sc.Name, &sc.Cron, &sc.TimeZone, &catchUp, &sc.Paused, &sc.Job.Queue, &sc.Job.Kind,
		&payload, &sc.Job.Priority, &sc.Job.MaxAttempts, &group, &sc.NextRunAt, &sc.LastRunAt, &sc.LastJobID,
		&sc.Version, &sc.CreatedAt, &sc.UpdatedAt}, extra...)...)
	if err != nil {
		return nil, err
	}
	sc.CatchUp = readpast.CatchUp(catchUp)
	sc.Job.Payload = payload
	if group != nil {
		sc.Job.Group = *group
	}
	for _, t := range []**time.Time{&sc.NextRunAt, &sc.LastRunAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	sc.CreatedAt, sc.UpdatedAt = sc.CreatedAt.UTC(), sc.UpdatedAt.UTC()
	return &sc, nil
}

func noSchedule(name string) error {
	return fmt.Errorf("schedule %q: %w", name, readpast.ErrScheduleNotFound)
}

// putAttempts bounds the attempts of PutSchedule and of a resume, each of
// which fails only when a scheduler fired a later tick meanwhile.
const putAttempts = 10

// PutSchedule creates or replaces a schedule (see readpast.Store). A new
// next tick is the first after now, or after the last tick that fired when
// that is later: the statement refuses one that is not (a scheduler whose
// clock runs ahead may have fired a later tick since now was read), and
// the put is tried again from the last fired tick.
func (s *Store) PutSchedule(ctx context.Context, p readpast.ScheduleParams) (*readpast.Schedule, bool, error) {
	now := time.Now()
	p, c, err := p.Normalize(now)
	if err != nil {
		return nil, false, err
	}
	var group *string
	if p.Job.Group != "" {
		group = &p.Job.Group
	}
	from := now
	for range putAttempts {
		var next *time.Time
		if n := c.Next(from); !n.IsZero() {
			next = &n
		}
		var created bool
		sc, err := scanSchedule(s.pool.QueryRow(ctx, schedulePutSQL, p.Name, p.Cron, p.TimeZone, string(p.CatchUp), p.Paused,
			p.Job.Queue, p.Job.Kind, string(p.Job.Payload), p.Job.Priority, p.Job.MaxAttempts, group, next), &created)
		if errors.Is(err, pgx.ErrNoRows) {
			// A tick at or after next has fired: start after it.
			cur, err := s.GetSchedule(ctx, p.Name)
			if err != nil {
				return nil, false, err
			}
			if cur.LastRunAt != nil && cur.LastRunAt.After(from) {
				from = *cur.LastRunAt
			}
			continue
		}
		if err != nil {
			return nil, false, opErr("put schedule", err)
		}
		return sc, created, nil
	}
	return nil, false, fmt.Errorf("put schedule %q: schedulers kept firing later ticks; try again", p.Name)
}

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, name string) (*readpast.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, scheduleGetSQL, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, noSchedule(name)
	}
	if err != nil {
		return nil, opErr("get schedule", err)
	}
	return sc, nil
}

// ListSchedules returns every schedule by name.
func (s *Store) ListSchedules(ctx context.Context) ([]*readpast.Schedule, error) {
	return s.schedules(ctx, "list schedules", scheduleListSQL)
}

// DueSchedules returns up to limit running schedules due at now.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*readpast.Schedule, error) {
	return s.schedules(ctx, "due schedules", scheduleDueSQL, now, limit)
}

func (s *Store) schedules(ctx context.Context, op, q string, args ...any) ([]*readpast.Schedule, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, opErr(op, err)
	}
	defer rows.Close()
	out := []*readpast.Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, opErr(op, err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, opErr(op, err)
	}
	return out, nil
}

// DeleteSchedule deletes a schedule and its runs, those of a fire that
// commits meanwhile included (sql/schedule_delete.sql).
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, scheduleDeleteSQL, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return noSchedule(name)
		}
		_, err = tx.Exec(ctx, scheduleDeleteRunsSQL, name)
		return err
	})
	if err != nil && !errors.Is(err, readpast.ErrScheduleNotFound) {
		return opErr("delete schedule", err)
	}
	return err
}

// PauseSchedule pauses or resumes a schedule.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool) (*readpast.Schedule, error) {
	if paused {
		sc, err := scanSchedule(s.pool.QueryRow(ctx, schedulePauseSQL, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, noSchedule(name)
		}
		if err != nil {
			return nil, opErr("pause schedule", err)
		}
		return sc, nil
	}
	for range putAttempts {
		sc, err := s.GetSchedule(ctx, name)
		if err != nil || !sc.Paused {
			return sc, err
		}
		sc, err = scanSchedule(s.pool.QueryRow(ctx, scheduleResumeSQL, name, sc.Version, sc.NextAfter(laterOf(time.Now(), sc.LastRunAt))))
		if errors.Is(err, pgx.ErrNoRows) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return nil, opErr("resume schedule", err)
		}
		return sc, nil
	}
	return nil, fmt.Errorf("resume schedule %q: it kept changing; try again", name)
}

// laterOf returns the later of now and t (nil: now).
func laterOf(now time.Time, t *time.Time) time.Time {
	if t != nil && t.After(now) {
		return *t
	}
	return now
}

// ScheduleRuns returns a schedule's latest runs, newest first.
func (s *Store) ScheduleRuns(ctx context.Context, name string, limit int) ([]readpast.ScheduleRun, error) {
	if limit < 1 {
		return nil, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	rows, err := s.pool.Query(ctx, scheduleRunsSQL, name, limit)
	if err != nil {
		return nil, opErr("schedule runs", err)
	}
	defer rows.Close()
	out := []readpast.ScheduleRun{}
	for rows.Next() {
		var r readpast.ScheduleRun
		if err := rows.Scan(&r.Tick, &r.JobID, &r.CatchUp, &r.CreatedAt); err != nil {
			return nil, opErr("schedule runs", err)
		}
		r.Tick, r.CreatedAt = r.Tick.UTC(), r.CreatedAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("schedule runs", err)
	}
	return out, nil
}

// FireSchedule fires one tick in one statement (sql/schedule_fire.sql). A
// tick at or before the last one that fired makes no job: the schedule
// moves on to f.Next, and FireSchedule reports it fired with no job.
func (s *Store) FireSchedule(ctx context.Context, f readpast.Firing) (bool, *readpast.Job, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	var (
		fired bool
		id    *int64
	)
	err := s.pool.QueryRow(ctx, scheduleFireSQL, f.Name, f.Version, f.Expect, f.Tick, f.Next, f.CatchUp).Scan(&fired, &id)
	if err != nil {
		return false, nil, opErr("fire schedule", err)
	}
	if id == nil {
		return fired, nil, nil
	}
	s.pendingAgain()
	j, err := s.Get(ctx, *id)
	if err != nil {
		// The job exists; it may have finished and been pruned already.
		return fired, &readpast.Job{ID: *id}, nil
	}
	return fired, j, nil
}
