package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// runNowSQL makes a pending job due now (sql/run_now.sql).
var runNowSQL = mustStatement("run_now")

// runNowAttempts bounds the statements of one RunNow: each one after the
// first follows a job that changed between a statement's snapshot and its
// update (or its read), which a job does only a few times in a row.
const runNowAttempts = 5

// RunNow makes a pending job due now (sql/run_now.sql): a job whose
// run-at is later than now gets now, and a job due already is returned
// unchanged. Any other state is refused with readpast.ErrInvalidState
// naming it; an unknown id is readpast.ErrNotFound.
//
// A claim that holds the job's row when the statement reaches it (a job
// due by the claim's clock, not yet by the statement's) is waited for, and
// the job, running by then, is refused. A job that changed after the
// statement's snapshot (its row held by a transaction that committed
// meanwhile, or made live again since) is looked at again.
func (s *Store) RunNow(ctx context.Context, id int64) (*readpast.Job, error) {
	defer s.claimFrom.ahead() // it may make a job due ahead of a position (claimfrom.go)
	for attempt := 1; ; attempt++ {
		var (
			hurried bool
			now     time.Time
		)
		j, err := retryDeadlock(ctx, func() (*readpast.Job, error) {
			return scanJobAfter(s.pool.QueryRow(ctx, runNowSQL, id), &hurried, &now)
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			// Not live in the statement's snapshot: finished, unknown,
			// or live since (enqueued, or retried from history).
			if j, err = s.Get(ctx, id); err != nil {
				return nil, err
			}
			if j.State != readpast.StatePending {
				return nil, fmt.Errorf("job %d is %s: %w", id, j.State, readpast.ErrInvalidState)
			}
		case err != nil:
			return nil, opErr("run now", err)
		case hurried:
			s.pendingAgain()
			return j, nil
		case j.State != readpast.StatePending:
			return nil, fmt.Errorf("job %d is %s: %w", id, j.State, readpast.ErrInvalidState)
		case !j.RunAt.After(now):
			return j, nil // due already: unchanged
		}
		// Pending and not yet due, yet not made due: its row changed
		// after the snapshot. The next statement sees how.
		if attempt == runNowAttempts {
			return nil, fmt.Errorf("run now: job %d changed under each of %d attempts; try again", id, attempt)
		}
	}
}
