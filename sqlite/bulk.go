package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// bulk runs one bulk action in write transactions of up to
// storekit.BulkBatch jobs each: walk lists the next ids past the last one
// acted on (with their state, for history walks), and act changes one job
// inside the batch's transaction, reporting whether it did and whether
// workers should be woken. SQLite has one writer at a time, so a batch
// holds every other write (claims included) back for as long as it runs,
// a few milliseconds; nothing is ever skipped.
func (s *Store) bulk(ctx context.Context, op string, f readpast.JobFilter, live bool,
	act func(tx *sql.Tx, id int64, state readpast.JobState, nowUS int64) (changed bool, wake wakeup, err error)) (int, error) {
	walk := bulkHistoryIDsSQL
	switch {
	case live && f.Tag != "":
		walk = bulkLiveTagIDsSQL
	case live:
		walk = bulkLiveIDsSQL
	case f.Tag != "":
		walk = bulkHistoryTagIDsSQL
	}
	total := 0
	after := int64(0)
	for {
		var n int
		var last int64
		var wake wakeup
		err := s.writeTx(ctx, op, func(tx *sql.Tx) error {
			n, last, wake = 0, 0, wakeup{}
			type entry struct {
				id    int64
				state readpast.JobState
			}
			rows, err := tx.QueryContext(ctx, walk, after, f.Queue, f.Kind, string(f.State), f.Group, f.Tag, storekit.BulkBatch)
			if err != nil {
				return err
			}
			var batch []entry
			for rows.Next() {
				var e entry
				dest := []any{&e.id}
				if !live {
					dest = append(dest, &e.state)
				}
				if err := rows.Scan(dest...); err != nil {
					rows.Close()
					return err
				}
				batch = append(batch, e)
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return err
			}
			nowUS := micros(s.now())
			for _, e := range batch {
				changed, w, err := act(tx, e.id, e.state, nowUS)
				if err != nil {
					return fmt.Errorf("job %d: %w", e.id, err)
				}
				if changed {
					n++
				}
				wake = wake.or(w)
				last = e.id
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		s.announce(wake)
		if last == 0 {
			return total, nil
		}
		after = last
	}
}

// BulkRetry retries, as Retry does, the failed and cancelled jobs f
// matches, in batches; a job whose unique key another job holds stays.
func (s *Store) BulkRetry(ctx context.Context, f readpast.JobFilter) (int, error) {
	f, err := f.Normalize(readpast.BulkRetryAction)
	if err != nil {
		return 0, err
	}
	return s.bulk(ctx, "bulk retry", f, false, func(tx *sql.Tx, id int64, state readpast.JobState, nowUS int64) (bool, wakeup, error) {
		if state != readpast.StateFailed && state != readpast.StateCancelled {
			return false, wakeup{}, nil
		}
		err := retryIn(ctx, tx, id, nowUS)
		if errors.Is(err, readpast.ErrInvalidState) {
			return false, wakeup{}, nil // its unique key is held
		}
		return err == nil, wakeup{now: err == nil}, err
	})
}

// BulkCancel cancels, as Cancel does, the blocked, pending and running
// jobs f matches, in batches. A job of the batch that an earlier one's
// cancellation cancelled with it (its child, by a cancel_child edge) is
// not counted again.
func (s *Store) BulkCancel(ctx context.Context, f readpast.JobFilter) (int, error) {
	f, err := f.Normalize(readpast.BulkCancelAction)
	if err != nil {
		return 0, err
	}
	return s.bulk(ctx, "bulk cancel", f, true, func(tx *sql.Tx, id int64, _ readpast.JobState, nowUS int64) (bool, wakeup, error) {
		wake, err := cancelIn(ctx, tx, id, nowUS, false, "")
		if errors.Is(err, readpast.ErrInvalidState) || errors.Is(err, readpast.ErrNotFound) {
			return false, wakeup{}, nil // finished since the walk listed it
		}
		return err == nil, wake, err
	})
}

// BulkDelete deletes, as Delete does, the finished jobs f matches, in
// batches.
func (s *Store) BulkDelete(ctx context.Context, f readpast.JobFilter) (int, error) {
	f, err := f.Normalize(readpast.BulkDeleteAction)
	if err != nil {
		return 0, err
	}
	return s.bulk(ctx, "bulk delete", f, false, func(tx *sql.Tx, id int64, _ readpast.JobState, _ int64) (bool, wakeup, error) {
		ok, err := deleteIn(ctx, tx, id)
		if errors.Is(err, readpast.ErrInvalidState) {
			return false, wakeup{}, nil // a parent that holds a child stays
		}
		return ok, wakeup{}, err
	})
}

// Delete deletes a finished job with its tag rows, its edges and the
// unique key it still holds. A finished parent that holds a child (a
// hold_child edge) is refused with readpast.ErrInvalidState.
func (s *Store) Delete(ctx context.Context, id int64) error {
	return s.writeTx(ctx, "delete", func(tx *sql.Tx) error {
		ok, err := deleteIn(ctx, tx, id)
		if err != nil || ok {
			return err
		}
		var state string
		err = tx.QueryRowContext(ctx, liveStateSQL, id).Scan(&state, new(sql.NullString))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
	})
}

// deleteIn deletes history row id inside tx, with what goes with it, and
// reports whether there was one. A finished parent that holds a child (a
// held edge) is readpast.ErrInvalidState naming the child: its retry and
// success would release it.
func deleteIn(ctx context.Context, tx *sql.Tx, id int64) (bool, error) {
	var child int64
	err := tx.QueryRowContext(ctx, heldChildSQL, id).Scan(&child)
	if err == nil {
		return false, fmt.Errorf("job %d holds job %d, which runs after it (hold_child): %w", id, child, readpast.ErrInvalidState)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, err
	}
	d := deleted{id: id}
	err = tx.QueryRowContext(ctx, deleteFinishedSQL, id).Scan(&d.key, &d.tags)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, dropWithJobs(ctx, tx, []deleted{d})
}
