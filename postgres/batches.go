package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

var _ readpast.BatchStore = (*Store)(nil)
var _ readpast.BatchSQLTxStore = (*Store)(nil)

// Batches (docs/design/workflows.md, "Batches"): the finishing job is a
// blocked job; each member is one of its parents; its seal is one more
// edge, from a parent no job has (the batch's id, negated).
var (
	batchSealEdgeSQL = mustStatement("batch_seal_edge")
	batchLockSQL     = mustStatement("batch_lock")
	batchWaitSQL     = mustStatement("batch_wait")
	batchEdgesSQL    = mustStatement("batch_edges")
	batchSealSQL     = mustStatement("batch_seal")
	batchSQL         = mustStatement("batch")
)

// OpenBatch stores p's finishing job, blocked by the batch's seal, and
// returns it (readpast.BatchStore).
func (s *Store) OpenBatch(ctx context.Context, p readpast.BatchParams) (*readpast.Job, error) {
	p, err := p.Normalize(time.Now())
	if err != nil {
		return nil, err
	}
	cols, err := newEnqueueCols([]readpast.EnqueueParams{p.Finisher}, nil)
	if err != nil {
		return nil, err
	}
	var out []*readpast.Job
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if out, err = insertFlowRows(ctx, pgxSource{tx}, cols, []int32{1}, []bool{false}); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, batchSealEdgeSQL, out[0].ID, string(readpast.BatchPolicy(p.OnSuccess)))
		return err
	})
	if err != nil {
		return nil, opErr("open batch", err)
	}
	s.dueLater(out, true) // a finisher released before its run_at (flowStored)
	return out[0], nil
}

// AddToBatch enqueues jobs as members of batch id, all or none
// (readpast.BatchStore). The batch's seal edge is locked first, so a join
// and the seal take turns: a job a join returned is one the finishing job
// waits for.
func (s *Store) AddToBatch(ctx context.Context, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	jobs, err := readpast.NormalizeBatchJobs(jobs, time.Now())
	if err != nil {
		return nil, err
	}
	defer s.claimFrom.ahead() // the members' run_at is the transaction's start (claimfrom.go)
	out, err := retryDeadlock(ctx, func() ([]*readpast.Job, error) {
		var out []*readpast.Job
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, err = joinBatch(ctx, pgxSource{tx}, id, jobs)
			return err
		})
		return out, err
	})
	if err != nil {
		return nil, batchErr("add to batch", err)
	}
	s.flowStored(out)
	return out, nil
}

// AddToBatchTx is AddToBatch inside the caller's transaction: the members
// exist if and only if tx commits. Until tx ends it holds the batch's
// seal: other joins and SealBatch wait for it.
func (s *Store) AddToBatchTx(ctx context.Context, tx pgx.Tx, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: AddToBatchTx: nil transaction")
	}
	return s.addToBatchIn(ctx, pgxSource{tx}, id, jobs)
}

// AddToBatchSQLTx is AddToBatchTx for database/sql users (pgx's stdlib
// driver) (readpast.BatchSQLTxStore).
func (s *Store) AddToBatchSQLTx(ctx context.Context, tx *sql.Tx, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: AddToBatchSQLTx: nil transaction")
	}
	return s.addToBatchIn(ctx, sqlSource{tx}, id, jobs)
}

func (s *Store) addToBatchIn(ctx context.Context, src rowSource, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	jobs, err := readpast.NormalizeBatchJobs(jobs, time.Now())
	if err != nil {
		return nil, err
	}
	defer s.claimFrom.ahead()
	out, err := joinBatch(ctx, src, id, jobs)
	if err != nil {
		return nil, batchErr("add to batch", err)
	}
	s.flowStored(out) // if the transaction commits; a spurious alarm costs a claim
	return out, nil
}

// joinBatch runs a join's statements on src, inside its transaction: the
// seal edge locked and checked, the members inserted as parents, the
// finishing job made to wait for them.
func joinBatch(ctx context.Context, src rowSource, id int64, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	var policy, sealState, finState string
	if err := queryOne(ctx, src, batchLockSQL, []any{id}, &policy, &sealState, &finState); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("batch %d: %w", id, readpast.ErrNotFound)
		}
		return nil, err
	}
	if err := batchClosed(id, sealState, finState); err != nil {
		return nil, err
	}
	cols, err := newEnqueueCols(jobs, nil)
	if err != nil {
		return nil, err
	}
	// The finishing job waits for the members first: a refusal (it ended
	// since batch_lock.sql read it) comes before any write. Past it, only
	// a statement's error can fail the join, which aborts a caller's
	// transaction too.
	var finID int64
	if err := queryOne(ctx, src, batchWaitSQL, []any{id, len(jobs)}, &finID); err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		var state string
		if err := queryOne(ctx, src, batchLockSQL, []any{id}, &policy, &sealState, &state); err != nil {
			return nil, err
		}
		if err := batchClosed(id, sealState, state); err != nil {
			return nil, err
		}
		return nil, &readpast.BatchClosedError{ID: id, State: readpast.JobState(state)}
	}
	waiting, parents := make([]int32, len(jobs)), make([]bool, len(jobs))
	for i := range parents {
		parents[i] = true
	}
	out, err := insertFlowRows(ctx, src, cols, waiting, parents)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(out))
	for i, j := range out {
		ids[i] = j.ID
	}
	if err := src.exec(ctx, batchEdgesSQL, id, ids, policy); err != nil {
		return nil, err
	}
	return out, nil
}

// batchClosed explains why batch id, its seal edge in state seal and its
// finishing job in state fin, takes no more members; nil if it takes
// them.
func batchClosed(id int64, seal, fin string) error {
	return readpast.BatchClosed(id, readpast.EdgeState(seal), readpast.JobState(fin))
}

// batchErr wraps a batch operation's error, keeping the ones that explain
// the batch as they are.
func batchErr(op string, err error) error {
	if errors.Is(err, readpast.ErrNotFound) || errors.Is(err, readpast.ErrInvalidState) || errors.Is(err, readpast.ErrInvalid) {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	return opErr(op, err)
}

// SealBatch seals batch id and returns it (readpast.BatchStore): its
// finishing job is released now if every member has ended.
func (s *Store) SealBatch(ctx context.Context, id int64) (readpast.Batch, error) {
	n, err := retryDeadlock(ctx, func() (int, error) {
		var n int
		err := s.pool.QueryRow(ctx, batchSealSQL, id).Scan(&n)
		return n, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return readpast.Batch{}, fmt.Errorf("postgres: seal batch %d: %w", id, readpast.ErrNotFound)
	}
	if err != nil {
		return readpast.Batch{}, opErr("seal batch", err)
	}
	if n > 0 {
		s.claimFrom.ahead() // a released finishing job is pending at now (claimfrom.go)
		s.hub.Broadcast()
	}
	return s.Batch(ctx, id)
}

// Batch returns batch id with its members counted by state
// (readpast.BatchStore).
func (s *Store) Batch(ctx context.Context, id int64) (readpast.Batch, error) {
	b := readpast.Batch{ID: id}
	var policy, seal string
	err := s.pool.QueryRow(ctx, batchSQL, id).Scan(&policy, &seal, &b.Members, &b.Live, &b.Succeeded, &b.Failed, &b.Cancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, fmt.Errorf("postgres: batch %d: %w", id, readpast.ErrNotFound)
	}
	if err != nil {
		return b, opErr("read batch", err)
	}
	b.OnSuccess = policy == string(readpast.CancelChild)
	if b.Finisher, err = s.Get(ctx, id); err != nil {
		return b, err
	}
	// A finishing job that ended unsealed (cancelled) takes no member
	// either.
	b.Sealed = seal != string(readpast.EdgeOpen) || b.Finisher.State != readpast.StateBlocked
	return b, nil
}

// insertFlowRows inserts the jobs of cols as enqueue_flow.sql does, each
// waiting for waiting[i] edges and marked as a parent when parents[i],
// and returns them in order.
func insertFlowRows(ctx context.Context, src rowSource, c *enqueueCols, waiting []int32, parents []bool) ([]*readpast.Job, error) {
	rows, err := src.query(ctx, enqueueFlowSQL, c.queues, c.kinds, c.payloads, c.prios, c.runAt,
		c.maxAtt, c.groups, c.tags, c.traceparents, c.tracestates, waiting, parents, c.moreKeys)
	if err != nil {
		return nil, err
	}
	out, err := scanJobs(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	if len(out) != len(waiting) {
		return nil, fmt.Errorf("stored %d jobs of %d", len(out), len(waiting))
	}
	c.setTraceContexts(out)
	return out, nil
}

// queryOne scans the one row q returns on src into dest; pgx.ErrNoRows
// when there is none.
func queryOne(ctx context.Context, src rowSource, q string, args []any, dest ...any) error {
	rows, err := src.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
