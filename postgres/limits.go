package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	limitLockSQL      = mustStatement("limit_lock")
	putLimitSQL       = mustStatement("put_limit")
	setGroupLimitSQL  = mustStatement("set_group_limit")
	deleteLimitSQL    = mustStatement("delete_limit")
	applyLimitSQL     = mustStatement("apply_limit")
	markKeysSQL       = mustStatement("mark_keys")
	getLimitsSQL      = mustStatement("get_limits")
	limitKeysSQL      = mustStatement("limit_keys")
	takeTokensLockSQL = mustStatement("take_tokens_lock")
	takeTokensRowSQL  = mustStatement("take_tokens_row")
	takeTokensSQL     = mustStatement("take_tokens")
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
			max(l.Burst, 1), l.Interval().Microseconds()).Scan(&created)
	})
	return created, err
}

// SetGroupLimit declares group's own limit with concurrency limit,
// keeping a rate it has.
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

// changeLimits runs change under the limits' lock, then gives every key
// row that key (a key or a template) may govern its limit, and marks
// those whose limit changed, each in a statement of its own.
//
// While it holds the limits' lock, claims create no key row, for any key:
// so it waits for no lock longer than limitLockWait at a time (a row held
// by a caller's open transaction, a TakeTokens waiting on one). Past
// that, it rolls back, lets the lock go for as long again, and starts over
// (the change is the same upsert or delete), for as long as ctx lasts.
func (s *Store) changeLimits(ctx context.Context, op, key string, change func(pgx.Tx) error) error {
	var changed []string
	attempt := func() error {
		_, err := retryDeadlock(ctx, func() (struct{}, error) {
			changed = changed[:0]
			return struct{}{}, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, limitLockWaitSQL); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, limitLockSQL); err != nil {
					return err
				}
				if err := change(tx); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, applyLimitSQL, key)
				if err != nil {
					return err
				}
				changed, err = pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil || len(changed) == 0 {
					return err
				}
				_, err = tx.Exec(ctx, markKeysSQL, changed)
				return err
			})
		})
		return err
	}
	err := attempt()
	for lockWaitedOut(err) {
		select {
		case <-ctx.Done():
			return opErr(op, fmt.Errorf("%w (its rows stayed held by other transactions)", ctx.Err()))
		case <-time.After(limitLockWait):
		}
		err = attempt()
	}
	if errors.Is(err, readpast.ErrLimitNotFound) {
		return err
	}
	if err != nil {
		return opErr(op, err)
	}
	if len(changed) > 0 {
		s.hub.Broadcast()
	}
	return nil
}

// limitLockWait bounds each wait of a limit change for a lock, and is how
// long it lets the limits' lock go before it tries again.
const limitLockWait = 100 * time.Millisecond

// limitLockWaitSQL sets that bound for the change's transaction.
const limitLockWaitSQL = "SET LOCAL lock_timeout = '100ms'"

// lockWaitedOut reports whether err is PostgreSQL's lock_timeout
// (lock_not_available).
func lockWaitedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

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
		err := r.Scan(&li.Key, &li.Concurrency, &li.Rate, &perUS, &li.Burst)
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
	if err := checkTake(key, n); err != nil {
		return readpast.TokenGrant{}, err
	}
	var (
		g        readpast.TokenGrant
		retry    *time.Time
		burst    int
		interval int64
	)
	_, err := retryDeadlock(ctx, func() (struct{}, error) {
		return struct{}{}, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, takeTokensLockSQL, key); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, takeTokensRowSQL, key); err != nil {
				return err
			}
			return tx.QueryRow(ctx, takeTokensSQL, key, n).Scan(&g.Granted, &retry, &burst, &interval)
		})
	})
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

// checkTake checks TakeTokens' arguments.
func checkTake(key string, n int) error {
	if err := readpast.CheckKey(key); err != nil {
		return err
	}
	if n < 1 || n > readpast.MaxTakeTokens {
		return &readpast.FieldError{Field: "n", Message: fmt.Sprintf("must be between 1 and %d", readpast.MaxTakeTokens)}
	}
	return nil
}
