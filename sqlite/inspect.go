package sqlite

import (
	"context"
	"database/sql"
	"math"
	"slices"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

var _ readpast.Inspector = (*Store)(nil)

// The dashboard's statements (readpast.Inspector). Times are unix
// microseconds; a minute is 60,000,000 of them.
const (
	// inspectQueuesSQL: every queue with live jobs, jobs finished since ?1
	// or a pause: live jobs due at ?2, scheduled after it, running and
	// retrying (pending after a failed attempt), the run_at of the oldest
	// due one, the jobs finished since ?1 per final
	// state (read along the history index on state and finished_at), and
	// when it was paused.
	inspectQueuesSQL = `SELECT queue, sum(due), sum(scheduled), sum(running), sum(retrying),
    sum(succeeded), sum(failed), sum(cancelled), min(oldest_due), max(paused_at)
FROM (
    SELECT queue,
           count(*) FILTER (WHERE state = 'pending' AND run_at <= ?2) AS due,
           count(*) FILTER (WHERE state = 'pending' AND run_at > ?2) AS scheduled,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'pending' AND attempt > 0) AS retrying,
           0 AS succeeded, 0 AS failed, 0 AS cancelled,
           min(run_at) FILTER (WHERE state = 'pending' AND run_at <= ?2) AS oldest_due,
           NULL AS paused_at
    FROM readpast_jobs
    GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, 0, 0,
           count(*) FILTER (WHERE state = 'succeeded'),
           count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'cancelled'),
           NULL, NULL
    FROM readpast_history
    WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at >= ?1
    GROUP BY queue
    UNION ALL
    SELECT name, 0, 0, 0, 0, 0, 0, 0, NULL, paused_at
    FROM readpast_queues
    WHERE paused_at IS NOT NULL
)
GROUP BY queue
ORDER BY queue`
	// finishedPerMinuteSQL counts the jobs of queue ?2 ('' = every queue)
	// finished since ?1 per minute and final state.
	finishedPerMinuteSQL = `SELECT finished_at / 60000000 * 60000000 AS minute,
    count(*) FILTER (WHERE state = 'succeeded'),
    count(*) FILTER (WHERE state = 'failed'),
    count(*) FILTER (WHERE state = 'cancelled')
FROM readpast_history
WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at >= ?1
  AND (?2 = '' OR queue = ?2)
GROUP BY minute`
	// startWaitsSQL lists, for the jobs of queue ?2 ('' = every queue)
	// whose latest attempt started in the minute of ?1 or later, when it started and how long it waited
	// after becoming due (run_at, or created_at when later). A job that
	// started after ?1 and finished did so after ?1 too.
	startWaitsSQL = `SELECT started_at, started_at - max(run_at, created_at)
FROM readpast_history
WHERE state IN ('succeeded', 'failed', 'cancelled') AND finished_at >= ?1
  AND started_at >= ?1 / 60000000 * 60000000 AND (?2 = '' OR queue = ?2)
UNION ALL
SELECT started_at, started_at - max(run_at, created_at)
FROM readpast_jobs
WHERE state = 'running' AND started_at >= ?1 / 60000000 * 60000000 AND (?2 = '' OR queue = ?2)`
	// busiestGroupsSQL: the ?1 keys with the most live jobs in queue ?2
	// ('' = every queue), with how many of those run and the key's limit
	// (no row means 1). A job counts under each of its keys: its group and
	// its more_keys.
	busiestGroupsSQL = `WITH k(key, state) AS (
    SELECT group_key, state FROM readpast_jobs
    WHERE group_key IS NOT NULL AND (?2 = '' OR queue = ?2)
    UNION ALL
    SELECT e.value, j.state FROM readpast_jobs AS j, json_each(j.more_keys) AS e
    WHERE j.more_keys IS NOT NULL AND (?2 = '' OR j.queue = ?2)
)
SELECT l.key, l.running, l.pending, coalesce(g.max_running, 1)
FROM (
    SELECT key, sum(state = 'running') AS running, sum(state = 'pending') AS pending
    FROM k
    GROUP BY key
    ORDER BY count(*) DESC, key
    LIMIT ?1
) AS l
LEFT JOIN readpast_groups AS g ON g.group_key = l.key
ORDER BY l.running + l.pending DESC, l.key`
	// searchSQL: among the newest ?8 jobs with ids below ?6 (live and
	// finished together), the first ?7 that match, newest first. Filters:
	// ?1 queue, ?2 state, ?3 kind, ?4 group, ?9 tag ('' = any), ?5 text found,
	// ignoring ASCII case, in the payload or errors ('' = any). Each table
	// is read backwards along its primary key, at most ?8 rows of it; a
	// state filter skips the table that cannot hold the state.
	searchSQL = `SELECT * FROM (
    SELECT * FROM (
        SELECT ` + liveSelect + ` FROM readpast_jobs
        WHERE id < ?6 AND (?2 = '' OR ?2 IN ('blocked', 'pending', 'running'))
        ORDER BY id DESC LIMIT ?8)
    UNION ALL
    SELECT * FROM (
        SELECT ` + historySelect + ` FROM readpast_history
        WHERE id < ?6 AND (?2 = '' OR ?2 IN ('succeeded', 'failed', 'cancelled'))
        ORDER BY id DESC LIMIT ?8)
    ORDER BY id DESC LIMIT ?8)
WHERE (?1 = '' OR queue = ?1) AND (?2 = '' OR state = ?2) AND (?3 = '' OR kind = ?3)
  AND (?4 = '' OR group_key = ?4)
  AND (?9 = '' OR instr(' ' || coalesce(tags, '') || ' ', ' ' || ?9 || ' ') > 0)
  AND (?5 = '' OR instr(lower(payload), lower(?5)) > 0 OR instr(lower(errors), lower(?5)) > 0)
ORDER BY id DESC
LIMIT ?7`
	// searchExaminedSQL: how many jobs searchSQL with state filter ?1 and
	// ids below ?2 examines with a budget of ?3, and the lowest id among
	// them.
	searchExaminedSQL = `SELECT count(*), coalesce(min(id), 0) FROM (
    SELECT id FROM (
        SELECT id FROM readpast_jobs
        WHERE id < ?2 AND (?1 = '' OR ?1 IN ('blocked', 'pending', 'running'))
        ORDER BY id DESC LIMIT ?3)
    UNION ALL
    SELECT id FROM (
        SELECT id FROM readpast_history
        WHERE id < ?2 AND (?1 = '' OR ?1 IN ('succeeded', 'failed', 'cancelled'))
        ORDER BY id DESC LIMIT ?3)
    ORDER BY id DESC LIMIT ?3)`
)

// minuteMicros is a minute in microseconds.
const minuteMicros = int64(time.Minute / time.Microsecond)

// QueueSummaries describes every queue with live jobs, jobs finished since
// since, or a pause, in one statement.
func (s *Store) QueueSummaries(ctx context.Context, since time.Time) ([]readpast.QueueSummary, error) {
	var out []readpast.QueueSummary
	err := s.readOp(ctx, "queue summaries", func(db *sql.DB) error {
		out = []readpast.QueueSummary{}
		rows, err := db.QueryContext(ctx, inspectQueuesSQL, micros(since), micros(s.now()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q readpast.QueueSummary
			var oldest, paused sql.NullInt64
			if err := rows.Scan(&q.Name, &q.Pending, &q.Scheduled, &q.Running, &q.Retrying, &q.Succeeded, &q.Failed, &q.Cancelled,
				&oldest, &paused); err != nil {
				return err
			}
			q.OldestDue, q.PausedAt = optTime(oldest), optTime(paused)
			q.Paused = q.PausedAt != nil
			out = append(out, q)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Activity returns the minutes since since with jobs finished or started.
// SQLite has no percentile function, so the start waits are read and their
// percentiles computed here, as PostgreSQL's percentile_cont does.
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
	var minutes map[int64]*readpast.ActivityMinute
	var waits map[int64][]int64
	minute := func(at int64) *readpast.ActivityMinute {
		at -= at % minuteMicros
		m, ok := minutes[at]
		if !ok {
			m = &readpast.ActivityMinute{Minute: fromMicros(at)}
			minutes[at] = m
		}
		return m
	}
	err := s.readOp(ctx, "activity", func(db *sql.DB) error {
		minutes, waits = map[int64]*readpast.ActivityMinute{}, map[int64][]int64{}
		rows, err := db.QueryContext(ctx, finishedPerMinuteSQL, micros(since), queue)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var at, succeeded, failed, cancelled int64
			if err := rows.Scan(&at, &succeeded, &failed, &cancelled); err != nil {
				return err
			}
			m := minute(at)
			m.Succeeded, m.Failed, m.Cancelled = succeeded, failed, cancelled
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = db.QueryContext(ctx, startWaitsSQL, micros(since), queue)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var at, wait int64
			if err := rows.Scan(&at, &wait); err != nil {
				return err
			}
			m := minute(at)
			m.Started++
			key := micros(m.Minute)
			waits[key] = append(waits[key], wait)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]readpast.ActivityMinute, 0, len(minutes))
	for at, m := range minutes {
		if w := waits[at]; len(w) > 0 {
			slices.Sort(w)
			m.LatencyP50 = percentileMicros(w, 0.5)
			m.LatencyP99 = percentileMicros(w, 0.99)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b readpast.ActivityMinute) int { return a.Minute.Compare(b.Minute) })
	return out, nil
}

// percentileMicros interpolates the p-th percentile (0 to 1) of sorted
// microsecond values linearly between the closest ranks, as PostgreSQL's
// percentile_cont does, rounded to the microsecond.
func percentileMicros(sorted []int64, p float64) time.Duration {
	pos := p * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	v := float64(sorted[lo]) + (pos-float64(lo))*float64(sorted[hi]-sorted[lo])
	return time.Duration(math.Round(v)) * time.Microsecond
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
	var out []readpast.GroupLoad
	err := s.readOp(ctx, "busiest groups", func(db *sql.DB) error {
		out = []readpast.GroupLoad{}
		rows, err := db.QueryContext(ctx, busiestGroupsSQL, limit, queue)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var g readpast.GroupLoad
			if err := rows.Scan(&g.Group, &g.Running, &g.Pending, &g.Limit); err != nil {
				return err
			}
			out = append(out, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
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
	var jobs []*readpast.Job
	err = s.readOp(ctx, "search", func(db *sql.DB) error {
		jobs = nil
		rows, err := db.QueryContext(ctx, searchSQL, p.Queue, string(p.State), p.Kind, p.Group, p.Text, before, p.Limit+1, p.Scan, p.Tag)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return readpast.SearchResult{}, err
	}
	return storekit.SearchPage(jobs, p.Limit, p.Scan, func() (n int, lowest int64, err error) {
		err = s.readOp(ctx, "search", func(db *sql.DB) error {
			return db.QueryRowContext(ctx, searchExaminedSQL, string(p.State), before, p.Scan).Scan(&n, &lowest)
		})
		return n, lowest, err
	})
}
