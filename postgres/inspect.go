package postgres

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

var _ readpast.Inspector = (*Store)(nil)

// The dashboard's statements (readpast.Inspector).
var (
	inspectQueuesSQL   = mustStatement("inspect_queues")
	inspectActivitySQL = mustStatement("inspect_activity")
	inspectGroupsSQL   = mustStatement("inspect_groups")
	inspectOldestSQL   = mustStatement("inspect_oldest_due")
	inspectRetrySQL    = mustStatement("inspect_retrying")
	searchSQL          = mustStatement("search")
	searchExaminedSQL  = mustStatement("search_examined")
)

// QueueSummaries describes every queue with live jobs, jobs finished since
// since, or a pause, in one statement.
func (s *Store) QueueSummaries(ctx context.Context, since time.Time) ([]readpast.QueueSummary, error) {
	rows, err := s.pool.Query(ctx, inspectQueuesSQL, since)
	if err != nil {
		return nil, opErr("queue summaries", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (readpast.QueueSummary, error) {
		var q readpast.QueueSummary
		err := row.Scan(&q.Name, &q.Pending, &q.Scheduled, &q.Running, &q.Retrying, &q.Succeeded, &q.Failed, &q.Cancelled,
			&q.OldestDue, &q.PausedAt)
		q.OldestDue, q.PausedAt = utcPtr(q.OldestDue), utcPtr(q.PausedAt)
		q.Paused = q.PausedAt != nil
		return q, err
	})
	if err != nil {
		return nil, opErr("queue summaries", err)
	}
	return out, nil
}

// Activity returns the minutes since since with jobs finished or started.
func (s *Store) Activity(ctx context.Context, since time.Time) ([]readpast.ActivityMinute, error) {
	return s.activity(ctx, "", since)
}

// QueueActivity is Activity for the jobs of one queue.
func (s *Store) QueueActivity(ctx context.Context, queue string, since time.Time) ([]readpast.ActivityMinute, error) {
	if err := readpast.CheckQueue(queue); err != nil {
		return nil, err
	}
	return s.activity(ctx, queue, since)
}

// activity is Activity for queue ("": every queue).
func (s *Store) activity(ctx context.Context, queue string, since time.Time) ([]readpast.ActivityMinute, error) {
	rows, err := s.pool.Query(ctx, inspectActivitySQL, since, queue)
	if err != nil {
		return nil, opErr("activity", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (readpast.ActivityMinute, error) {
		var m readpast.ActivityMinute
		var p50, p99 float64
		err := row.Scan(&m.Minute, &m.Succeeded, &m.Failed, &m.Cancelled, &m.Started, &p50, &p99)
		m.Minute = m.Minute.UTC()
		m.LatencyP50, m.LatencyP99 = seconds(p50), seconds(p99)
		return m, err
	})
	if err != nil {
		return nil, opErr("activity", err)
	}
	return out, nil
}

// BusiestGroups returns the limit groups with the most live jobs.
func (s *Store) BusiestGroups(ctx context.Context, limit int) ([]readpast.GroupLoad, error) {
	return s.busiestGroups(ctx, "", limit)
}

// QueueGroups returns the limit groups with the most live jobs in queue.
func (s *Store) QueueGroups(ctx context.Context, queue string, limit int) ([]readpast.GroupLoad, error) {
	if err := readpast.CheckQueue(queue); err != nil {
		return nil, err
	}
	return s.busiestGroups(ctx, queue, limit)
}

// busiestGroups is BusiestGroups among the jobs of queue ("": every
// queue).
func (s *Store) busiestGroups(ctx context.Context, queue string, limit int) ([]readpast.GroupLoad, error) {
	if limit < 1 {
		return nil, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	rows, err := s.pool.Query(ctx, inspectGroupsSQL, limit, queue)
	if err != nil {
		return nil, opErr("busiest groups", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (readpast.GroupLoad, error) {
		var g readpast.GroupLoad
		err := row.Scan(&g.Group, &g.Running, &g.Pending, &g.Limit)
		return g, err
	})
	if err != nil {
		return nil, opErr("busiest groups", err)
	}
	return out, nil
}

// OldestDueJob returns the due pending job of queue that has waited
// longest, or nil when none is due.
func (s *Store) OldestDueJob(ctx context.Context, queue string) (*readpast.Job, error) {
	if err := readpast.CheckQueue(queue); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, inspectOldestSQL, queue)
	if err != nil {
		return nil, opErr("oldest due job", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, opErr("oldest due job", err)
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	return jobs[0], nil
}

// Retrying lists the retrying jobs p selects, newest failure first, among
// the p.Scan whose latest attempt started last.
func (s *Store) Retrying(ctx context.Context, p readpast.RetryingParams) (readpast.RetryingResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.RetryingResult{}, err
	}
	rows, err := s.pool.Query(ctx, inspectRetrySQL, p.Queue, p.Limit, p.Scan)
	if err != nil {
		return readpast.RetryingResult{}, opErr("retrying jobs", err)
	}
	defer rows.Close()
	res := readpast.RetryingResult{Jobs: []*readpast.Job{}}
	var js jobScanner
	for rows.Next() {
		var read int64
		j, err := js.scan(rows, &read)
		if err != nil {
			return readpast.RetryingResult{}, opErr("retrying jobs", err)
		}
		res.Jobs = append(res.Jobs, j)
		res.Partial = read > int64(p.Scan)
	}
	if err := rows.Err(); err != nil {
		return readpast.RetryingResult{}, opErr("retrying jobs", err)
	}
	return res, nil
}

// Search lists the jobs matching p among the newest p.Scan below the
// cursor.
func (s *Store) Search(ctx context.Context, p readpast.SearchParams) (readpast.SearchResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.SearchResult{}, err
	}
	before := storekit.PageBelow(p.ListParams)
	rows, err := s.pool.Query(ctx, searchSQL, p.Queue, string(p.State), p.Kind, p.Group, p.Text, before, p.Limit+1, p.Scan, p.Tag)
	if err != nil {
		return readpast.SearchResult{}, opErr("search", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return readpast.SearchResult{}, opErr("search", err)
	}
	return storekit.SearchPage(jobs, p.Limit, p.Scan, func() (n int, lowest int64, err error) {
		if err := s.pool.QueryRow(ctx, searchExaminedSQL, string(p.State), before, p.Scan).Scan(&n, &lowest); err != nil {
			return 0, 0, opErr("search", err)
		}
		return n, lowest, nil
	})
}

// utcPtr returns t in UTC; nil stays nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// seconds converts a number of seconds to a duration, rounded to the
// microsecond (PostgreSQL's resolution).
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s*1e6)) * time.Microsecond
}
