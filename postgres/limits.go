package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// Limits per key (docs/design/flow-control.md). A key's row in
// readpast_groups carries the limit that governs it, so a claim reads the
// limit and the bucket from the row it locked, newest version. Declared
// limits live in readpast_limits; PutLimit and DeleteLimit copy them onto
// the rows they govern under the limits' lock, and a claim that creates a
// row resolves its limit under that lock too (readpast_key_limit).
var (
	limitLockSQL       = mustStatement("limit_lock")
	putLimitSQL        = mustStatement("put_limit")
	setGroupLimitSQL   = mustStatement("set_group_limit")
	deleteLimitSQL     = mustStatement("delete_limit")
	applyLimitSkipSQL  = mustStatementWith("apply_limit", "skip")
	applyLimitOneSQL   = mustStatementWith("apply_limit", "one")
	lockKeyRowSQL      = mustStatement("lock_key_row")
	limitLockSharedSQL = mustStatement("limit_lock_shared")
	markKeysSQL        = mustStatement("mark_keys")
	getLimitsSQL       = mustStatement("get_limits")
	limitKeysSQL       = mustStatement("limit_keys")
	takeTokensLockSQL  = mustStatement("take_tokens_lock")
	takeTokensRowSQL   = mustStatement("take_tokens_row")
	takeTokensSQL      = mustStatement("take_tokens")
)

// PutLimit declares the limit of l.Key and applies it to the keys it
// governs, in one transaction under the limits' lock.
func (s *Store) PutLimit(ctx context.Context, l readpast.Limit) (bool, error) {
	l, err := l.Normalize()
	if err != nil {
		return false, err
	}
	var created bool
	err = s.changeLimits(ctx, "put limit", l.Key, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, putLimitSQL, l.Key, l.Concurrency, l.Rate, l.Per.Microseconds(),
			max(l.Burst, 1), l.Interval().Microseconds(), l.Weight).Scan(&created)
	})
	return created, err
}

// SetGroupLimit declares group's own limit with concurrency limit,
// keeping a rate and weight it has.
func (s *Store) SetGroupLimit(ctx context.Context, group string, limit int) error {
	if err := readpast.CheckGroupLimit(group, limit); err != nil {
		return err
	}
	return s.changeLimits(ctx, "set group limit", group, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, setGroupLimitSQL, group, limit)
		return err
	})
}

// DeleteLimit deletes the limit declared for key and gives the keys it
// governed the limit that governs them now.
func (s *Store) DeleteLimit(ctx context.Context, key string) error {
	if err := readpast.CheckLimitKey(key); err != nil {
		return err
	}
	return s.changeLimits(ctx, "delete limit", key, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, deleteLimitSQL, key)
		if err == nil && tag.RowsAffected() == 0 {
			return readpast.ErrLimitNotFound
		}
		return err
	})
}

// changeLimits runs change under the limits' lock, gives every key row
// that key (a key or a template) may govern its limit, passing over the
// rows other transactions hold, and marks those whose limit changed; then,
// the lock let go, gives each row it passed over its limit in a
// transaction of its own, which waits for that row, then takes the
// limits' lock shared (apply_limit.sql). While the lock is held
// exclusively, claims create no key row for any key, so it is held only
// for statements that wait for no row. A row that exists needs no lock
// to be given its limit: the limit is committed, and a row pruned
// meanwhile is created again with it. Every row given a limit has the
// freed-slot counts of its key folded in (fold_freed.sql) before the
// transaction lets it go, so a key that gains a bound gets its running
// count exact.
func (s *Store) changeLimits(ctx context.Context, op, key string, change func(pgx.Tx) error) error {
	var changed, passed []string
	// applyOnce runs stmt for arg in a transaction of its own (under the
	// lock when change is set, else holding arg's row and the lock
	// shared), then folds and marks the keys it changed.
	applyOnce := func(stmt, arg string, change func(pgx.Tx) error) error {
		_, err := retryDeadlock(ctx, func() (struct{}, error) {
			var got, skipped []string
			err := pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
				if change != nil {
					if _, err := tx.Exec(ctx, limitLockSQL); err != nil {
						return err
					}
					if err := change(tx); err != nil {
						return err
					}
					// Held exclusively, the lock keeps claims from
					// creating key rows: a wait PostgreSQL makes despite
					// SKIP LOCKED (for the holder of a row's newer version)
					// ends after lockWaitTimeout, and the change is tried
					// again.
					if err := setLockTimeout(ctx, tx, lockWaitTimeout); err != nil {
						return err
					}
				} else {
					var k string
					err := tx.QueryRow(ctx, lockKeyRowSQL, arg).Scan(&k)
					if errors.Is(err, pgx.ErrNoRows) {
						return nil
					}
					if err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, limitLockSharedSQL); err != nil {
						return err
					}
				}
				rows, err := tx.Query(ctx, stmt, arg)
				if err != nil {
					return err
				}
				var k string
				var isChanged bool
				if _, err := pgx.ForEachRow(rows, []any{&k, &isChanged}, func() error {
					if isChanged {
						got = append(got, k)
					} else {
						skipped = append(skipped, k)
					}
					return nil
				}); err != nil || len(got) == 0 {
					return err
				}
				if _, err := tx.Exec(ctx, foldFreedKeysSQL, got); err != nil {
					return err
				}
				_, err = tx.Exec(ctx, markKeysSQL, got)
				return err
			})
			if err == nil {
				changed, passed = append(changed, got...), append(passed, skipped...)
			}
			return struct{}{}, err
		})
		return err
	}
	// apply is applyOnce, tried again while a try ends a lock wait.
	apply := func(stmt, arg string, change func(pgx.Tx) error) error {
		return retryLockWait(ctx, func() error { return applyOnce(stmt, arg, change) })
	}
	err := apply(applyLimitSkipSQL, key, change)
	for i := 0; err == nil && i < len(passed); i++ {
		err = apply(applyLimitOneSQL, passed[i], nil)
	}
	if errors.Is(err, readpast.ErrLimitNotFound) {
		return err
	}
	if err != nil {
		return opErr(op, err)
	}
	if len(changed) > 0 {
		// A raised limit gives slots or tokens now, to the keys' own jobs
		// (mark_keys.sql notifies when it marked any) and to the first
		// keys that waited for them (the announce trigger's marks, which
		// notify no one): every process's claimers are woken.
		s.hub.Broadcast()
		s.wakeOthers()
	}
	return nil
}

// readCommitted is the isolation of limit changes and TakeTokens,
// whatever the sessions' default: each of their statements must read
// what committed before it began (the rows claims created while the
// change waited for the limits' lock; the limits readpast_key_limit
// reads after taking it).
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// GetLimit returns the limit declared for key with its keys' states.
func (s *Store) GetLimit(ctx context.Context, key string) (*readpast.LimitInfo, error) {
	if err := readpast.CheckLimitKey(key); err != nil {
		return nil, err
	}
	ls, err := s.limits(ctx, []string{key})
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, readpast.ErrLimitNotFound
	}
	return &ls[0], nil
}

// ListLimits returns every declared limit by key.
func (s *Store) ListLimits(ctx context.Context) ([]readpast.LimitInfo, error) {
	return s.limits(ctx, nil)
}

// limits reads the limits declared for keys (all when nil), and the
// states of the keys they govern.
func (s *Store) limits(ctx context.Context, keys []string) ([]readpast.LimitInfo, error) {
	rows, err := s.pool.Query(ctx, getLimitsSQL, keys)
	if err != nil {
		return nil, opErr("get limits", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (readpast.LimitInfo, error) {
		var li readpast.LimitInfo
		var perUS int64
		err := r.Scan(&li.Key, &li.Concurrency, &li.Rate, &perUS, &li.Burst, &li.Weight)
		if li.Rate > 0 {
			li.Per = time.Duration(perUS) * time.Microsecond
		} else {
			li.Burst = 0
		}
		li.Keys = []readpast.KeyState{}
		return li, err
	})
	if err != nil {
		return nil, opErr("get limits", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	at := map[string]int{}
	names := make([]string, len(out))
	for i, li := range out {
		at[li.Key], names[i] = i, li.Key
	}
	rows, err = s.pool.Query(ctx, limitKeysSQL, names, readpast.MaxLimitKeys)
	if err != nil {
		return nil, opErr("get limits", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			limitKey, key       string
			running, maxRunning int
			intervalUS          int64
			burst               int
			tat                 *time.Time
			now                 time.Time
		)
		if err := rows.Scan(&limitKey, &key, &running, &maxRunning, &intervalUS, &burst, &tat, &now); err != nil {
			return nil, opErr("get limits", err)
		}
		b := storekit.Bucket{Interval: time.Duration(intervalUS) * time.Microsecond, Burst: burst}
		if tat != nil {
			b.TAT = *tat
		}
		li := &out[at[limitKey]]
		li.Keys = append(li.Keys, storekit.KeyState(now, key, limitKey, running, maxRunning, b))
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("get limits", err)
	}
	return out, nil
}

// TakeTokens takes n starts from key's bucket, all or none.
func (s *Store) TakeTokens(ctx context.Context, key string, n int) (readpast.TokenGrant, error) {
	if err := readpast.CheckTake(key, n); err != nil {
		return readpast.TokenGrant{}, err
	}
	var (
		g        readpast.TokenGrant
		retry    *time.Time
		burst    int
		interval int64
	)
	// The key's row is created, if missing, in a transaction of its own
	// (under the limits' lock, shared): the take then waits for the row
	// without holding that lock, which a limit change needs. A row pruned
	// in between (nothing running, a full bucket) is created again.
	var err error
	for found := false; !found && err == nil; {
		_, err = retryDeadlock(ctx, func() (struct{}, error) {
			return struct{}{}, pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, takeTokensLockSQL, key); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, takeTokensRowSQL, key)
				return err
			})
		})
		if err != nil {
			break
		}
		_, err = retryDeadlock(ctx, func() (struct{}, error) {
			return struct{}{}, pgx.BeginTxFunc(ctx, s.pool, readCommitted, func(tx pgx.Tx) error {
				err := tx.QueryRow(ctx, takeTokensSQL, key, n).Scan(&g.Granted, &retry, &burst, &interval)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				found = err == nil
				return err
			})
		})
	}
	if err != nil {
		return g, opErr("take tokens", err)
	}
	if interval > 0 && n > burst {
		return readpast.TokenGrant{}, &readpast.FieldError{Field: "n",
			Message: fmt.Sprintf("asks for more than the burst of %s (%d): it can never be granted", key, burst)}
	}
	if retry != nil {
		g.RetryAt = *retry
	}
	return g, nil
}
