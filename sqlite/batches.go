package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/readpast/readpast"
)

var (
	_ readpast.BatchStore      = (*Store)(nil)
	_ readpast.BatchSQLTxStore = (*Store)(nil)
)

// Batches (docs/design/workflows.md, "Batches"): the finishing job is a
// blocked job; each member is one of its parents; its seal is one more
// edge, from a parent no job has (the batch's id, negated). Writers are
// serialized: a join, the seal and the members' finishes each see the
// others' writes whole.
const (
	// batchSealEdgeSQL stores batch ?1's seal, of policy ?2.
	batchSealEdgeSQL = `INSERT INTO readpast_edges (parent_id, child_id, policy, state) VALUES (-?1, ?1, ?2, 'open')`
	// batchLockSQL reads batch ?1's seal and its finishing job's state
	// (from either table; '' for none).
	batchLockSQL = `SELECT e.policy, e.state, coalesce(j.state, h.state, '')
FROM readpast_edges e
LEFT JOIN readpast_jobs j ON j.id = e.child_id
LEFT JOIN readpast_history h ON h.id = e.child_id
WHERE e.parent_id = -?1 AND e.child_id = ?1`
	// batchWaitSQL makes batch ?1's finishing job wait for ?2 more
	// members, if it is still blocked.
	batchWaitSQL = `UPDATE readpast_jobs SET waiting_on = waiting_on + ?2 WHERE id = ?1 AND state = 'blocked'`
	// batchEdgesSQL stores the edges from the members ?2 (a JSON array
	// of ids) to batch ?1's finishing job, of policy ?3.
	batchEdgesSQL = `INSERT INTO readpast_edges (parent_id, child_id, policy, state)
SELECT value, ?1, ?3, 'open' FROM json_each(?2)`
	// batchSealSQL resolves batch ?1's seal edge, if it is open.
	batchSealSQL = `UPDATE readpast_edges SET state = 'done' WHERE parent_id = -?1 AND child_id = ?1 AND state = 'open'`
	// batchReleaseSQL takes the seal off batch ?1's finishing job's
	// count, releasing it, due at the later of its run_at and ?2, when no
	// member is left (readpast_jobs_released gives a grouped one its
	// ready mark).
	batchReleaseSQL = `UPDATE readpast_jobs
SET waiting_on = waiting_on - 1,
    state = CASE WHEN waiting_on = 1 THEN 'pending' ELSE state END,
    run_at = CASE WHEN waiting_on = 1 THEN max(run_at, ?2) ELSE run_at END
WHERE id = ?1 AND state = 'blocked'`
	// batchSQL reads batch ?1: its seal's policy and state, and its
	// members counted by state (live ones from readpast_jobs, the others
	// by their history rows).
	batchSQL = `SELECT s.policy, s.state,
       count(m.parent_id),
       count(j.id),
       count(CASE WHEN j.id IS NULL AND h.state = 'succeeded' THEN 1 END),
       count(CASE WHEN j.id IS NULL AND h.state = 'failed' THEN 1 END),
       count(CASE WHEN j.id IS NULL AND h.state = 'cancelled' THEN 1 END)
FROM readpast_edges s
LEFT JOIN readpast_edges m ON m.child_id = s.child_id AND m.parent_id > 0
LEFT JOIN readpast_jobs j ON j.id = m.parent_id
LEFT JOIN readpast_history h ON h.id = m.parent_id
WHERE s.parent_id = -?1 AND s.child_id = ?1
GROUP BY s.policy, s.state`
)

// OpenBatch stores p's finishing job, blocked by the batch's seal, and
// returns it (readpast.BatchStore).
func (s *Store) OpenBatch(ctx context.Context, p readpast.BatchParams) (*readpast.Job, error) {
	now := s.now()
	p, err := p.Normalize(now)
	if err != nil {
		return nil, err
	}
	params := p.Finisher
	if params.RunAt.IsZero() {
		params.RunAt = now
	}
	params.Payload = slices.Clone(params.Payload)
	var out []*readpast.Job
	err = s.writeTx(ctx, "open batch", func(tx *sql.Tx) error {
		var err error
		out, err = insertRows(ctx, tx, []readpast.EnqueueParams{params}, []flowRow{{waitingOn: 1}}, now)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, batchSealEdgeSQL, out[0].ID, string(readpast.BatchPolicy(p.OnSuccess)))
		return err
	})
	if err != nil {
		return nil, err
	}
	// A finisher with a run_at ahead that is released before then gets
	// the release's wake-up too early; an alarm at its run_at finds it
	// (or, while it is still blocked, nothing: a probe).
	s.dueLater(out)
	return out[0], nil
}

// AddToBatch enqueues jobs as members of batch id, all or none
// (readpast.BatchStore).
func (s *Store) AddToBatch(ctx context.Context, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	now := s.now()
	jobs, err := readpast.NormalizeBatchJobs(jobs, now)
	if err != nil {
		return nil, err
	}
	var out []*readpast.Job
	err = s.writeTx(ctx, "add to batch", func(tx *sql.Tx) error {
		var err error
		out, err = joinBatch(ctx, tx, id, jobs, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.flowStored(out)
	return out, nil
}

// AddToBatchSQLTx is AddToBatch inside the caller's transaction tx, which
// must be a transaction on s.DB(): the members exist if and only if tx
// commits (readpast.BatchSQLTxStore). As with EnqueueSQLTx, there is no
// retry on SQLITE_BUSY: the caller owns the transaction, and subscribers
// are woken once it has ended; after an error, roll tx back.
func (s *Store) AddToBatchSQLTx(ctx context.Context, tx *sql.Tx, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("sqlite: AddToBatchSQLTx: nil transaction")
	}
	now := s.now()
	jobs, err := readpast.NormalizeBatchJobs(jobs, now)
	if err != nil {
		return nil, err
	}
	out, err := joinBatch(ctx, tx, id, jobs, now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: add to batch: %w", classify(err))
	}
	s.storedInTx(out)
	return out, nil
}

// joinBatch checks batch id inside tx and inserts jobs as its members.
func joinBatch(ctx context.Context, tx *sql.Tx, id int64, jobs []readpast.EnqueueParams, now time.Time) ([]*readpast.Job, error) {
	var policy, seal, fin string
	err := tx.QueryRowContext(ctx, batchLockSQL, id).Scan(&policy, &seal, &fin)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("batch %d: %w", id, readpast.ErrNotFound)
	case err != nil:
		return nil, err
	}
	if err := readpast.BatchClosed(id, readpast.EdgeState(seal), readpast.JobState(fin)); err != nil {
		return nil, err
	}
	params := make([]readpast.EnqueueParams, len(jobs))
	rows := make([]flowRow, len(jobs))
	for i, p := range jobs {
		if p.RunAt.IsZero() {
			p.RunAt = now
		}
		p.Payload = slices.Clone(p.Payload)
		params[i], rows[i] = p, flowRow{hasChildren: true}
	}
	out, err := insertRows(ctx, tx, params, rows, now)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, batchWaitSQL, id, len(out)); err != nil {
		return nil, err
	}
	ids := make([]int64, len(out))
	for i, j := range out {
		ids[i] = j.ID
	}
	js, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, batchEdgesSQL, id, string(js), policy); err != nil {
		return nil, err
	}
	return out, nil
}

// SealBatch seals batch id and returns it (readpast.BatchStore): its
// finishing job is released now if every member has ended.
func (s *Store) SealBatch(ctx context.Context, id int64) (readpast.Batch, error) {
	released := false
	err := s.writeTx(ctx, "seal batch", func(tx *sql.Tx) error {
		released = false
		var policy, seal, fin string
		err := tx.QueryRowContext(ctx, batchLockSQL, id).Scan(&policy, &seal, &fin)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("batch %d: %w", id, readpast.ErrNotFound)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, batchSealSQL, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		res, err = tx.ExecContext(ctx, batchReleaseSQL, id, micros(s.now()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		released = n > 0
		return err
	})
	if err != nil {
		return readpast.Batch{}, err
	}
	if released {
		s.wake() // before the read, which may fail: the release has committed
	}
	b, err := s.Batch(ctx, id)
	if err == nil && released && b.Finisher.State == readpast.StatePending {
		s.dueLater([]*readpast.Job{b.Finisher})
	}
	return b, err
}

// Batch returns batch id with its members counted by state
// (readpast.BatchStore).
func (s *Store) Batch(ctx context.Context, id int64) (readpast.Batch, error) {
	b := readpast.Batch{ID: id}
	var policy, seal string
	err := s.readOp(ctx, "read batch", func(db *sql.DB) error {
		return db.QueryRowContext(ctx, batchSQL, id).Scan(&policy, &seal, &b.Members, &b.Live, &b.Succeeded, &b.Failed, &b.Cancelled)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("sqlite: batch %d: %w", id, readpast.ErrNotFound)
	}
	if err != nil {
		return b, err
	}
	b.OnSuccess = policy == string(readpast.CancelChild)
	if b.Finisher, err = s.Get(ctx, id); err != nil {
		return b, err
	}
	b.Sealed = seal != string(readpast.EdgeOpen) || b.Finisher.State != readpast.StateBlocked
	return b, nil
}
