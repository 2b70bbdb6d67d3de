package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/readpast/readpast"
)

// scanSchedule reads the columns of scheduleColumns.
func scanSchedule(r rowScanner) (*readpast.Schedule, error) {
	var (
		sc                  readpast.Schedule
		payload, catchUp    string
		group               sql.NullString
		next, last, lastJob sql.NullInt64
		created, updated    int64
	)
	if err := r.Scan(&sc.Name, &sc.Cron, &sc.TimeZone, &catchUp, &sc.Paused, &sc.Job.Queue, &sc.Job.Kind,
		&payload, &sc.Job.Priority, &sc.Job.MaxAttempts, &group, &next, &last, &lastJob,
		&sc.Version, &created, &updated); err != nil {
		return nil, err
	}
	sc.CatchUp = readpast.CatchUp(catchUp)
	sc.Job.Payload = []byte(payload)
	sc.Job.Group = group.String
	sc.NextRunAt, sc.LastRunAt = optTime(next), optTime(last)
	if lastJob.Valid {
		id := lastJob.Int64
		sc.LastJobID = &id
	}
	sc.CreatedAt, sc.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &sc, nil
}

func noSchedule(name string) error {
	return fmt.Errorf("schedule %q: %w", name, readpast.ErrScheduleNotFound)
}

// optMicros converts an optional time to nullable microseconds.
func optMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return micros(*t)
}

// PutSchedule creates or replaces a schedule (see readpast.Store).
func (s *Store) PutSchedule(ctx context.Context, p readpast.ScheduleParams) (*readpast.Schedule, bool, error) {
	now := s.now()
	p, c, err := p.Normalize(now)
	if err != nil {
		return nil, false, err
	}
	var paused any
	if p.Paused != nil {
		paused = *p.Paused
	}
	var (
		sc      *readpast.Schedule
		created bool
	)
	err = s.writeTx(ctx, "put schedule", func(tx *sql.Tx) error {
		var n int
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, scheduleExistsSQL, p.Name).Scan(&n, &last); err != nil {
			return err
		}
		created = n == 0
		// A next tick never goes back to or before the last one that
		// fired: a scheduler whose clock runs ahead may have fired a
		// tick after now.
		from := now
		if last.Valid {
			from = laterOf(now, fromMicros(last.Int64))
		}
		var next any
		if n := c.Next(from); !n.IsZero() {
			next = micros(n)
		}
		if _, err := tx.ExecContext(ctx, schedulePutSQL, p.Name, p.Cron, p.TimeZone, string(p.CatchUp), paused,
			p.Job.Queue, p.Job.Kind, string(p.Job.Payload), p.Job.Priority, p.Job.MaxAttempts,
			nullString(p.Job.Group), next, micros(now)); err != nil {
			return err
		}
		sc, err = scanSchedule(tx.QueryRowContext(ctx, scheduleGetSQL, p.Name))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return sc, created, nil
}

// GetSchedule returns a schedule.
func (s *Store) GetSchedule(ctx context.Context, name string) (*readpast.Schedule, error) {
	var sc *readpast.Schedule
	err := s.readOp(ctx, "get schedule", func(db *sql.DB) error {
		var err error
		sc, err = scanSchedule(db.QueryRowContext(ctx, scheduleGetSQL, name))
		if errors.Is(err, sql.ErrNoRows) {
			return noSchedule(name)
		}
		return err
	})
	return sc, err
}

// ListSchedules returns every schedule by name.
func (s *Store) ListSchedules(ctx context.Context) ([]*readpast.Schedule, error) {
	return s.schedules(ctx, "list schedules", scheduleListSQL)
}

// DueSchedules returns up to limit running schedules due at now.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*readpast.Schedule, error) {
	return s.schedules(ctx, "due schedules", scheduleDueSQL, micros(now), limit)
}

func (s *Store) schedules(ctx context.Context, op, q string, args ...any) ([]*readpast.Schedule, error) {
	var out []*readpast.Schedule
	err := s.readOp(ctx, op, func(db *sql.DB) error {
		out = []*readpast.Schedule{}
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sc, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			out = append(out, sc)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteSchedule deletes a schedule and its runs.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	return s.writeTx(ctx, "delete schedule", func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, scheduleDeleteSQL, name)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return noSchedule(name)
		}
		_, err = tx.ExecContext(ctx, scheduleDeleteRunsSQL, name)
		return err
	})
}

// PauseSchedule pauses or resumes a schedule.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool) (*readpast.Schedule, error) {
	var sc *readpast.Schedule
	err := s.writeTx(ctx, "pause schedule", func(tx *sql.Tx) error {
		cur, err := scanSchedule(tx.QueryRowContext(ctx, scheduleGetSQL, name))
		if errors.Is(err, sql.ErrNoRows) {
			return noSchedule(name)
		}
		if err != nil {
			return err
		}
		now := s.now()
		switch {
		case paused:
			_, err = tx.ExecContext(ctx, schedulePauseSQL, name, micros(now))
		case cur.Paused:
			from := now
			if cur.LastRunAt != nil {
				from = laterOf(now, *cur.LastRunAt) // never back to a fired tick
			}
			_, err = tx.ExecContext(ctx, scheduleResumeSQL, name, cur.Version, optMicros(cur.NextAfter(from)), micros(now))
		}
		if err != nil {
			return err
		}
		sc, err = scanSchedule(tx.QueryRowContext(ctx, scheduleGetSQL, name))
		return err
	})
	return sc, err
}

// ScheduleRuns returns a schedule's latest runs, newest first.
func (s *Store) ScheduleRuns(ctx context.Context, name string, limit int) ([]readpast.ScheduleRun, error) {
	if limit < 1 {
		return nil, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	var out []readpast.ScheduleRun
	err := s.readOp(ctx, "schedule runs", func(db *sql.DB) error {
		out = []readpast.ScheduleRun{}
		rows, err := db.QueryContext(ctx, scheduleRunsSQL, name, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r             readpast.ScheduleRun
				tick, created int64
			)
			if err := rows.Scan(&tick, &r.JobID, &r.CatchUp, &created); err != nil {
				return err
			}
			r.Tick, r.CreatedAt = fromMicros(tick), fromMicros(created)
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// FireSchedule fires one tick in one write transaction: the conditional
// update of the schedule's row (scheduleFireSQL) decides, then the tick's
// job is enqueued and its run recorded. A tick at or before the last one
// that fired makes no job: the schedule moves on to f.Next, and
// FireSchedule reports it fired with no job.
func (s *Store) FireSchedule(ctx context.Context, f readpast.Firing) (bool, *readpast.Job, error) {
	var (
		fired bool
		job   *readpast.Job
	)
	err := s.writeTx(ctx, "fire schedule", func(tx *sql.Tx) error {
		fired, job = false, nil
		var (
			p       readpast.EnqueueParams
			payload string
			group   sql.NullString
			last    sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, scheduleLastRunSQL, f.Name).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if f.Tick != nil && last.Valid && micros(*f.Tick) <= last.Int64 {
			f.Tick, f.CatchUp = nil, false // fired already: only move on
		}
		err = tx.QueryRowContext(ctx, scheduleFireSQL, f.Name, f.Version, micros(f.Expect), optMicros(f.Tick),
			optMicros(f.Next), nil).Scan(&p.Queue, &p.Kind, &payload, &p.Priority, &p.MaxAttempts, &group)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		fired = true
		if f.Tick == nil {
			return nil
		}
		p.Payload, p.Group, p.RunAt = []byte(payload), group.String, *f.Tick
		now := s.now()
		jobs, err := insertJobs(ctx, tx, []readpast.EnqueueParams{p}, now)
		if err != nil {
			return err
		}
		job = jobs[0]
		if _, err := tx.ExecContext(ctx, setLastJobSQL, f.Name, job.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, scheduleRunSQL, f.Name, micros(*f.Tick), job.ID, f.CatchUp, micros(now)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, scheduleTrimRunsSQL, f.Name)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	if job != nil {
		s.wake()
	}
	return fired, job, nil
}

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
