package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/readpast/readpast"
)

// The queue page's and the Retries view's reads (readpast.Inspector).
const (
	// oldestDueSQL: the due (run_at at ?2 or before) pending job of queue
	// ?1 that has waited longest: the lowest run_at, then the lowest id.
	oldestDueSQL = `SELECT ` + liveSelect + ` FROM readpast_jobs
WHERE queue = ?1 AND state = 'pending' AND run_at <= ?2
ORDER BY run_at, id
LIMIT 1`
	// retryingReadSQL: up to ?2 retrying jobs (pending after a failed
	// attempt) of queue ?1 ('' = every queue), those whose latest attempt
	// started last first, along the retrying index (0011): their ids and
	// the time of their latest error, as the errors' JSON has it.
	retryingReadSQL = `SELECT id, coalesce(errors ->> '$[#-1].at', '') FROM readpast_jobs
WHERE state = 'pending' AND attempt > 0 AND (?1 = '' OR queue = ?1)
ORDER BY started_at DESC, id DESC
LIMIT ?2`
	// retryingJobsSQL: the jobs of the ids in the JSON array ?1 that are
	// still retrying.
	retryingJobsSQL = `SELECT ` + liveSelect + ` FROM readpast_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending' AND attempt > 0`
)

// OldestDueJob returns the due pending job of queue that has waited
// longest, or nil when none is due.
func (s *Store) OldestDueJob(ctx context.Context, queue string) (*readpast.Job, error) {
	if err := readpast.CheckQueue(queue); err != nil {
		return nil, err
	}
	var j *readpast.Job
	err := s.readOp(ctx, "oldest due job", func(db *sql.DB) error {
		var err error
		j, err = scanJob(db.QueryRowContext(ctx, oldestDueSQL, queue, micros(s.now())))
		if errors.Is(err, sql.ErrNoRows) {
			j, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Retrying lists the retrying jobs p selects, newest failure first, among
// the p.Scan whose latest attempt started last. SQLite keeps an error's
// time as JSON text: the candidates' times are read and ordered here, and
// then the chosen jobs, in one read transaction.
func (s *Store) Retrying(ctx context.Context, p readpast.RetryingParams) (readpast.RetryingResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.RetryingResult{}, err
	}
	type candidate struct {
		id int64
		at time.Time // zero when the job has no error
	}
	var res readpast.RetryingResult
	err = s.readOp(ctx, "retrying jobs", func(db *sql.DB) error {
		res = readpast.RetryingResult{Jobs: []*readpast.Job{}}
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, retryingReadSQL, p.Queue, p.Scan+1)
		if err != nil {
			return err
		}
		var cands []candidate
		for rows.Next() {
			var c candidate
			var at string
			if err := rows.Scan(&c.id, &at); err != nil {
				rows.Close()
				return err
			}
			if at != "" {
				// A time the store wrote (encoding/json); one it cannot
				// read sorts last, as no error does.
				c.at, _ = time.Parse(time.RFC3339Nano, at)
			}
			cands = append(cands, c)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		if len(cands) > p.Scan {
			res.Partial, cands = true, cands[:p.Scan]
		}
		slices.SortFunc(cands, func(a, b candidate) int {
			return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.id, a.id))
		})
		cands = cands[:min(len(cands), p.Limit)]
		place := make(map[int64]int, len(cands))
		ids := make([]int64, len(cands))
		for i, c := range cands {
			place[c.id], ids[i] = i, c.id
		}
		rows, err = tx.QueryContext(ctx, retryingJobsSQL, idsJSON(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			res.Jobs = append(res.Jobs, j)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		slices.SortFunc(res.Jobs, func(a, b *readpast.Job) int { return cmp.Compare(place[a.ID], place[b.ID]) })
		return nil
	})
	if err != nil {
		return readpast.RetryingResult{}, err
	}
	return res, nil
}
