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
		err := row.Scan(&q.Name, &q.Pending, &q.Scheduled, &q.Running, &q.Succeeded, &q.Failed, &q.Cancelled,
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
	rows, err := s.pool.Query(ctx, inspectActivitySQL, since)
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
	if limit < 1 {
		return nil, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	rows, err := s.pool.Query(ctx, inspectGroupsSQL, limit)
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
