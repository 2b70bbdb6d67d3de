package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// bulkRetryRounds bounds how often a bulk action goes back, without
// waiting, to the jobs that other transactions held when its walk reached
// them.
const bulkRetryRounds = 8

// defaultBulkWait bounds how long a bulk action then waits, in all, for
// the rows still held (Store.bulkWait).
const defaultBulkWait = 5 * time.Second

// bulkStatement is a bulk action's statement (sql/bulk_*.sql), as it
// skips locked rows and as it waits for them ("wait").
type bulkStatement struct{ skip, wait string }

func mustBulkStatement(name string) bulkStatement {
	return bulkStatement{skip: mustStatement(name), wait: mustStatementWith(name, "wait")}
}

// bulk runs one bulk action: its statement once per batch of
// storekit.BulkBatch ids, each in a transaction of its own, walking the
// matching jobs by id; then the ids it passed over because another
// transaction held them, again, a few rounds apart; then each id still
// held, waiting for its row (bulkWait), up to the store's bound in all.
// What it matched and could not act on within the bound it names in a
// *readpast.SkippedError, with the count of what it did. After each batch
// that changed jobs it calls wake, which wakes the claimers (and, for a
// retry, first makes their next claims full ones: pendingAgain).
func (s *Store) bulk(ctx context.Context, op, action string, stmt bulkStatement, f readpast.JobFilter, wake func()) (int, error) {
	f, err := f.Normalize(action)
	if err != nil {
		return 0, err
	}
	total := 0
	var skipped []int64
	after := int64(0)
	for {
		n, last, skip, err := s.bulkBatch(ctx, stmt.skip, f, after, nil, wake)
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
		for start := 0; start < len(skipped); start += storekit.BulkBatch {
			part := skipped[start:min(start+storekit.BulkBatch, len(skipped))]
			n, _, skip, err := s.bulkBatch(ctx, stmt.skip, f, 0, part, wake)
			total += n
			if err != nil {
				return total, opErr(op, err)
			}
			again = append(again, skip...)
		}
		skipped = again
	}
	if len(skipped) == 0 {
		return total, nil
	}
	deadline := time.Now().Add(cmp.Or(s.bulkWait, defaultBulkWait))
	var held []int64
	for _, id := range skipped {
		n, ok, err := s.bulkWaitOne(ctx, stmt.wait, f, id, time.Until(deadline), wake)
		total += n
		if err != nil {
			return total, opErr(op, err)
		}
		if !ok {
			held = append(held, id)
		}
	}
	if len(held) > 0 {
		return total, &readpast.SkippedError{Action: action, IDs: held}
	}
	return total, nil
}

// bulkWaitOne runs a bulk statement rendered "wait" on job id: it waits
// for the job's row for at most wait (at least a millisecond), then acts
// on the job if it still matches f. It reports how many jobs it changed
// (0 or 1) and false if the row stayed held.
func (s *Store) bulkWaitOne(ctx context.Context, stmt string, f readpast.JobFilter, id int64, wait time.Duration, wake func()) (int, bool, error) {
	timeout := strconv.FormatInt(max(wait.Milliseconds(), 1), 10) + "ms"
	type out struct {
		n      int
		groups []string
	}
	o, err := retryDeadlock(ctx, func() (o out, err error) {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := setLockTimeout(ctx, tx, timeout); err != nil {
				return err
			}
			var last *int64
			var skipped []int64
			return tx.QueryRow(ctx, stmt, pgx.QueryExecModeDescribeExec,
				f.Queue, f.Kind, string(f.State), f.Tag, f.Group, int64(0), int64(storekit.BulkBatch), []int64{id}).
				Scan(&o.n, &last, &skipped, &o.groups)
		})
		return o, err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: held past the wait
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if o.n > 0 {
		wake()
	}
	return o.n, true, s.markGroups(ctx, o.groups)
}

// markGroups marks the next jobs of the groups whose pending jobs a bulk
// cancel just cancelled (markGroupHeads).
func (s *Store) markGroups(ctx context.Context, groups []string) error {
	for _, g := range groups {
		if err := s.markGroupHeads(ctx, g); err != nil {
			return fmt.Errorf("jobs cancelled, then %w", err)
		}
	}
	return nil
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
		groups  []string
	}
	o, err := retryDeadlock(ctx, func() (o out, err error) {
		err = s.pool.QueryRow(ctx, stmt, s.hotMode,
			f.Queue, f.Kind, string(f.State), f.Tag, f.Group, after, int64(storekit.BulkBatch), ids).
			Scan(&o.n, &o.last, &o.skipped, &o.groups)
		return o, err
	})
	if err != nil {
		return 0, nil, nil, err
	}
	if o.n > 0 {
		wake()
	}
	return o.n, o.last, o.skipped, s.markGroups(ctx, o.groups)
}

// BulkRetry retries the failed and cancelled jobs f matches
// (sql/bulk_retry.sql), in batches.
func (s *Store) BulkRetry(ctx context.Context, f readpast.JobFilter) (int, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	// A retried job may lie ahead of a claim position: the next claims
	// are full ones before the claimers wake (pendingAgain).
	return s.bulk(ctx, "bulk retry", readpast.BulkRetryAction, bulkRetryStmt, f, s.pendingAgain)
}

// BulkCancel cancels the pending and running jobs f matches
// (sql/bulk_cancel.sql), in batches that never make a claim wait.
func (s *Store) BulkCancel(ctx context.Context, f readpast.JobFilter) (int, error) {
	// A cancelled parent may release children under run_anyway, ahead
	// of a claim position: the next claims are full ones before the
	// claimers wake (pendingAgain).
	defer s.claimFrom.ahead()
	return s.bulk(ctx, "bulk cancel", readpast.BulkCancelAction, bulkCancelStmt, f, s.pendingAgain)
}

// BulkDelete deletes the finished jobs f matches (sql/bulk_delete.sql),
// in batches.
func (s *Store) BulkDelete(ctx context.Context, f readpast.JobFilter) (int, error) {
	return s.bulk(ctx, "bulk delete", readpast.BulkDeleteAction, bulkDeleteStmt, f, s.hub.Broadcast)
}

// Delete deletes one finished job (sql/bulk_delete.sql on its id). A job
// that another transaction holds (a retry of it) is tried again a few
// times.
func (s *Store) Delete(ctx context.Context, id int64) error {
	for round := 0; ; round++ {
		n, _, skipped, err := s.bulkBatch(ctx, bulkDeleteStmt.skip, readpast.JobFilter{}, 0, []int64{id}, s.hub.Broadcast)
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
	var (
		held    int64
		backlog bool
	)
	if err := s.pool.QueryRow(ctx, flowHeldChildrenSQL, id).Scan(&held, &backlog); err != nil {
		return opErr("delete", err)
	}
	switch {
	case backlog:
		return fmt.Errorf("job %d: the edges to its children are still being resolved; try again in a moment: %w",
			id, readpast.ErrInvalidState)
	case held > 0:
		return fmt.Errorf("job %d holds back %d blocked job(s): retry it, or cancel them, first: %w",
			id, held, readpast.ErrInvalidState)
	}
	return errors.New("postgres: delete: the job stayed locked by another transaction")
}
