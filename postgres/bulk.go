package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// bulkRetryRounds bounds how often a bulk action goes back to the jobs
// that other transactions held when its walk reached them.
const bulkRetryRounds = 8

// bulk runs one bulk action: the statement stmt (sql/bulk_*.sql) once per
// batch of readpast.BulkBatch ids, each in a transaction of its own,
// walking the matching jobs by id; then the ids it passed over because
// another transaction held them, again, a few rounds apart. A job still
// held after that was being finished by its holder, which decides its
// fate. After each batch that changed jobs it calls wake, which wakes the
// claimers (and, for a retry, first makes their next claims full ones:
// pendingAgain). It returns how many jobs the action changed.
func (s *Store) bulk(ctx context.Context, op, action, stmt string, f readpast.JobFilter, wake func()) (int, error) {
	f, err := f.Normalize(action)
	if err != nil {
		return 0, err
	}
	total := 0
	var skipped []int64
	after := int64(0)
	for {
		n, last, skip, err := s.bulkBatch(ctx, stmt, f, after, nil, wake)
		total += n
		if err != nil {
			return total, opErr(op, err)
		}
		skipped = append(skipped, skip...)
		if last == nil {
			break
		}
		after = *last
	}
	for round := 1; len(skipped) > 0 && round <= bulkRetryRounds; round++ {
		select {
		case <-ctx.Done():
			return total, opErr(op, ctx.Err())
		case <-time.After(time.Duration(round) * 10 * time.Millisecond):
		}
		var again []int64
		for start := 0; start < len(skipped); start += readpast.BulkBatch {
			part := skipped[start:min(start+readpast.BulkBatch, len(skipped))]
			n, _, skip, err := s.bulkBatch(ctx, stmt, f, 0, part, wake)
			total += n
			if err != nil {
				return total, opErr(op, err)
			}
			again = append(again, skip...)
		}
		skipped = again
	}
	return total, nil
}

// bulkBatch runs one batch of a bulk statement: past id after, or on ids
// when set, and calls wake if it changed any. It returns how many jobs it
// changed, the walk's last id (nil at the end) and the ids other
// transactions held.
func (s *Store) bulkBatch(ctx context.Context, stmt string, f readpast.JobFilter, after int64, ids []int64, wake func()) (n int, last *int64, skipped []int64, err error) {
	type out struct {
		n       int
		last    *int64
		skipped []int64
	}
	o, err := retryDeadlock(ctx, func() (o out, err error) {
		err = s.pool.QueryRow(ctx, stmt, pgx.QueryExecModeDescribeExec,
			f.Queue, f.Kind, string(f.State), f.Tag, f.Group, after, int64(readpast.BulkBatch), ids).
			Scan(&o.n, &o.last, &o.skipped)
		return o, err
	})
	if err != nil {
		return 0, nil, nil, err
	}
	if o.n > 0 {
		wake()
	}
	return o.n, o.last, o.skipped, nil
}

// BulkRetry retries the failed and cancelled jobs f matches
// (sql/bulk_retry.sql), in batches.
func (s *Store) BulkRetry(ctx context.Context, f readpast.JobFilter) (int, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	// A retried job may lie ahead of a claim position: the next claims
	// are full ones before the claimers wake (pendingAgain).
	return s.bulk(ctx, "bulk retry", readpast.BulkRetryAction, bulkRetrySQL, f, s.pendingAgain)
}

// BulkCancel cancels the pending and running jobs f matches
// (sql/bulk_cancel.sql), in batches that never make a claim wait.
func (s *Store) BulkCancel(ctx context.Context, f readpast.JobFilter) (int, error) {
	return s.bulk(ctx, "bulk cancel", readpast.BulkCancelAction, bulkCancelSQL, f, s.hub.Broadcast)
}

// BulkDelete deletes the finished jobs f matches (sql/bulk_delete.sql),
// in batches.
func (s *Store) BulkDelete(ctx context.Context, f readpast.JobFilter) (int, error) {
	return s.bulk(ctx, "bulk delete", readpast.BulkDeleteAction, bulkDeleteSQL, f, s.hub.Broadcast)
}

// Delete deletes one finished job (sql/bulk_delete.sql on its id). A job
// that another transaction holds (a retry of it) is tried again a few
// times.
func (s *Store) Delete(ctx context.Context, id int64) error {
	for round := 0; ; round++ {
		n, _, skipped, err := s.bulkBatch(ctx, bulkDeleteSQL, readpast.JobFilter{}, 0, []int64{id}, s.hub.Broadcast)
		if err != nil {
			return opErr("delete", err)
		}
		if n > 0 {
			return nil
		}
		if len(skipped) == 0 || round == bulkRetryRounds {
			break
		}
		select {
		case <-ctx.Done():
			return opErr("delete", ctx.Err())
		case <-time.After(time.Duration(round+1) * 10 * time.Millisecond):
		}
	}
	j, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if !j.State.Final() {
		return fmt.Errorf("job %d is %s: %w", id, j.State, readpast.ErrInvalidState)
	}
	return errors.New("postgres: delete: the job stayed locked by another transaction")
}
