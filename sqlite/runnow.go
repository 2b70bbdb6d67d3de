package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/readpast/readpast"
)

// hurrySQL makes pending job ?1 due at ?2 when it is not due by then.
const hurrySQL = `UPDATE readpast_jobs SET run_at = ?2 WHERE id = ?1 AND state = 'pending' AND run_at > ?2`

// RunNow makes a pending job due now: a job whose run-at is later than
// now gets now (and a grouped job a ready mark there), and a job due
// already is returned unchanged. Any other state is refused with
// readpast.ErrInvalidState naming it; an unknown id is
// readpast.ErrNotFound. The state is read and changed in one write
// transaction, so no claim comes between them.
func (s *Store) RunNow(ctx context.Context, id int64) (*readpast.Job, error) {
	var (
		job     *readpast.Job
		hurried bool
	)
	err := s.writeTx(ctx, "run now", func(tx *sql.Tx) error {
		var err error
		if hurried, err = runNowIn(ctx, tx, id, micros(s.now())); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRowContext(ctx, getLiveSQL, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	if hurried {
		s.wake()
	}
	return job, nil
}

// runNowIn makes pending job id due at nowUS inside tx (see RunNow) and
// reports whether it changed its run-at.
func runNowIn(ctx context.Context, tx *sql.Tx, id int64, nowUS int64) (bool, error) {
	var (
		state string
		group sql.NullString
	)
	err := tx.QueryRowContext(ctx, liveStateSQL, id).Scan(&state, &group)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, historyErr(ctx, tx, id)
	case err != nil:
		return false, err
	case readpast.JobState(state) != readpast.StatePending:
		return false, fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
	}
	res, err := tx.ExecContext(ctx, hurrySQL, id, nowUS)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err // due already: unchanged
	}
	if group.Valid {
		// A mark at its new place: its key's turn.
		return true, markJobs(ctx, tx, []int64{id})
	}
	return true, nil
}
