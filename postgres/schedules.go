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

// PutSchedule creates or replaces a schedule (see readpast.Store).
func (s *Store) PutSchedule(ctx context.Context, p readpast.ScheduleParams) (*readpast.Schedule, bool, error) {
	now := time.Now()
	p, c, err := p.Normalize(now)
	if err != nil {
		return nil, false, err
	}
	var next *time.Time
	if n := c.Next(now); !n.IsZero() {
		next = &n
	}
	var group *string
	if p.Job.Group != "" {
		group = &p.Job.Group
	}
	var created bool
	sc, err := scanSchedule(s.pool.QueryRow(ctx, schedulePutSQL, p.Name, p.Cron, p.TimeZone, string(p.CatchUp), p.Paused,
		p.Job.Queue, p.Job.Kind, string(p.Job.Payload), p.Job.Priority, p.Job.MaxAttempts, group, next), &created)
	if err != nil {
		return nil, false, opErr("put schedule", err)
	}
	return sc, created, nil
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

// DeleteSchedule deletes a schedule and its runs.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	var n int
	if err := s.pool.QueryRow(ctx, scheduleDeleteSQL, name).Scan(&n); err != nil {
		return opErr("delete schedule", err)
	}
	if n == 0 {
		return noSchedule(name)
	}
	return nil
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
	for {
		sc, err := s.GetSchedule(ctx, name)
		if err != nil || !sc.Paused {
			return sc, err
		}
		sc, err = scanSchedule(s.pool.QueryRow(ctx, scheduleResumeSQL, name, sc.Version, sc.NextAfter(time.Now())))
		if errors.Is(err, pgx.ErrNoRows) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return nil, opErr("resume schedule", err)
		}
		return sc, nil
	}
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

// FireSchedule fires one tick in one statement (sql/schedule_fire.sql).
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
