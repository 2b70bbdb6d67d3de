package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// uniqueUntil is when p's key period ends, in microseconds (nil for none).
func uniqueUntil(p readpast.EnqueueParams, nowUS int64) any {
	if p.UniqueKey == "" || p.UniqueFor <= 0 {
		return nil
	}
	return nowUS + p.UniqueFor.Microseconds()
}

// enqueueIn inserts normalized jobs in tx. Each entry with a unique key
// settles on its own: its key's row is inserted with ON CONFLICT DO
// NOTHING, so the primary key decides whether it takes the key; when it
// does not, the row's holder is the entry's answer (Duplicate), unless the
// row no longer holds the key (its holder finished and its period ended),
// which the entry then takes over. Later entries of a batch with the same
// key are duplicates of whatever holds it after the first.
func enqueueIn(ctx context.Context, tx *sql.Tx, jobs []readpast.EnqueueParams, now time.Time) ([]*readpast.Job, error) {
	first := storekit.FirstKeys(jobs)
	keyed := false
	for _, f := range first {
		keyed = keyed || f >= 0
	}
	if !keyed {
		return insertJobs(ctx, tx, jobs, now)
	}
	nowUS := micros(now)
	out := make([]*readpast.Job, len(jobs))
	var add []int             // entries that get a new job
	holder := map[int]int64{} // entry -> the job that holds its key
	for i, f := range first {
		if f < 0 {
			add = append(add, i)
			continue
		}
		if f != i {
			continue
		}
		p := jobs[i]
		r, err := tx.ExecContext(ctx, takeKeySQL, p.UniqueKey, 0, uniqueUntil(p, nowUS))
		if err != nil {
			return nil, err
		}
		if n, err := r.RowsAffected(); err != nil {
			return nil, err
		} else if n == 1 {
			add = append(add, i)
			continue
		}
		var (
			id        int64
			live      bool
			keepUntil int64
		)
		if err := tx.QueryRowContext(ctx, keyHolderSQL, p.UniqueKey).Scan(&id, &live, &keepUntil); err != nil {
			return nil, fmt.Errorf("unique key %q: %w", p.UniqueKey, err)
		}
		if live || keepUntil > nowUS {
			holder[i] = id
			continue
		}
		if _, err := tx.ExecContext(ctx, replaceKeySQL, p.UniqueKey, 0, uniqueUntil(p, nowUS)); err != nil {
			return nil, err
		}
		add = append(add, i)
	}
	part := make([]readpast.EnqueueParams, len(add))
	for k, i := range add {
		part[k] = jobs[i]
	}
	inserted, err := insertJobs(ctx, tx, part, now)
	if err != nil {
		return nil, err
	}
	for k, i := range add {
		out[i] = inserted[k]
		if key := jobs[i].UniqueKey; key != "" {
			if _, err := tx.ExecContext(ctx, setKeyJobSQL, key, inserted[k].ID); err != nil {
				return nil, err
			}
		}
	}
	for i, id := range holder {
		j, err := scanJob(tx.QueryRowContext(ctx, getSQL, id))
		if err != nil {
			return nil, fmt.Errorf("unique key %q: holder job %d: %w", jobs[i].UniqueKey, id, err)
		}
		j.Duplicate = true
		out[i] = j
	}
	storekit.SettleKeyRepeats(out, first)
	return out, nil
}

// releaseKeys frees the unique keys of the finished jobs ids (already in
// history): deleted when they have no period or it ended, kept (no longer
// live) until their period ends otherwise.
func releaseKeys(ctx context.Context, tx *sql.Tx, ids []int64, nowUS int64) error {
	js := idsJSON(ids)
	if _, err := tx.ExecContext(ctx, releaseKeysSQL, js, nowUS); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, keepKeysSQL, js)
	return err
}

// retakeKey makes job id, about to come back from history, take its
// unique key again; readpast.ErrInvalidState when another job holds it.
func retakeKey(ctx context.Context, tx *sql.Tx, id int64, nowUS int64) error {
	var (
		key   sql.NullString
		until sql.NullInt64
	)
	if err := tx.QueryRowContext(ctx, historyKeySQL, id).Scan(&key, &until); err != nil {
		return err
	}
	if !key.Valid {
		return nil
	}
	var keepUntil any
	if until.Valid {
		keepUntil = until.Int64
	}
	r, err := tx.ExecContext(ctx, retakeKeySQL, key.String, id, keepUntil, nowUS)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n == 1 {
		return err
	}
	var (
		holder     int64
		live       bool
		keepUntil2 int64
	)
	if err := tx.QueryRowContext(ctx, keyHolderSQL, key.String).Scan(&holder, &live, &keepUntil2); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return fmt.Errorf("job %d: its unique key %q is held by job %d: %w", id, key.String, holder, readpast.ErrInvalidState)
}
