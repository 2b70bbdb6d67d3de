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

// Limits per key (docs/design/flow-control.md), as on PostgreSQL: a key's
// row in readpast_groups carries the limit that governs it and its
// bucket; declared limits live in readpast_limits. Writers are
// serialized, so every write transaction reads the newest rows and no
// window opens between a read and a write.

const (
	// keyRowSQL reads key ?1's row.
	keyRowSQL = `SELECT running, max_running, limit_key, interval_us, burst, tat
FROM readpast_groups WHERE group_key = ?1`
	// resolveLimitSQL finds the limit that governs key ?1: its own, else
	// the longest template it matches.
	resolveLimitSQL = `SELECT key, concurrency, interval_us, burst FROM readpast_limits
WHERE key = ?1 OR (substr(key, -1) = '*' AND substr(?1, 1, length(key) - 1) = substr(key, 1, length(key) - 1))
ORDER BY key = ?1 DESC, length(key) DESC
LIMIT 1`
	// keyTakeSQL counts ?2 newly running jobs of key ?1, creating its row
	// with the limit ?3..?6 when it has none, and sets its tat to ?7.
	keyTakeSQL = `INSERT INTO readpast_groups (group_key, running, max_running, limit_key, interval_us, burst, tat)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (group_key) DO UPDATE SET running = running + excluded.running, tat = excluded.tat`
	putLimitSQL = `INSERT INTO readpast_limits (key, concurrency, rate, per_us, burst, interval_us, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (key) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
    per_us = excluded.per_us, burst = excluded.burst, interval_us = excluded.interval_us,
    updated_at = excluded.updated_at`
	setGroupLimitSQL = `INSERT INTO readpast_limits (key, concurrency, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (key) DO UPDATE SET concurrency = excluded.concurrency, updated_at = excluded.updated_at`
	limitExistsSQL  = `SELECT count(*) FROM readpast_limits WHERE key = ?1`
	deleteLimitSQL  = `DELETE FROM readpast_limits WHERE key = ?1`
	governedKeysSQL = `SELECT group_key FROM readpast_groups
WHERE group_key = ?1 OR (substr(?1, -1) = '*' AND substr(group_key, 1, length(?1) - 1) = substr(?1, 1, length(?1) - 1))
ORDER BY group_key`
	setKeyLimitSQL = `UPDATE readpast_groups SET limit_key = ?2, max_running = ?3, interval_us = ?4, burst = ?5
WHERE group_key = ?1`
	listLimitsSQL = `SELECT key, concurrency, rate, per_us, burst FROM readpast_limits
WHERE ?1 IS NULL OR key = ?1 ORDER BY key`
	limitKeysSQL = `SELECT group_key, running, max_running, interval_us, burst, tat FROM readpast_groups
WHERE limit_key = ?1 ORDER BY group_key LIMIT ?2`
	setTatSQL = `UPDATE readpast_groups SET tat = ?2 WHERE group_key = ?1`
)

// keyLimit is the limit that governs a key, as its row carries it.
type keyLimit struct {
	limitKey   sql.NullString
	maxRunning int
	bucket     storekit.Bucket
}

// keyState is a key's row, or what a missing row stands for.
type keyState struct {
	exists  bool
	running int
	keyLimit
}

// free is how many more of the key's jobs may run now.
func (k keyState) free() int { return k.maxRunning - k.running }

// readKey reads key's row in tx, or resolves the limit a row created now
// would get.
func readKey(ctx context.Context, tx *sql.Tx, key string) (keyState, error) {
	var (
		k   keyState
		iv  int64
		tat sql.NullInt64
	)
	err := tx.QueryRowContext(ctx, keyRowSQL, key).Scan(&k.running, &k.maxRunning, &k.limitKey, &iv, &k.bucket.Burst, &tat)
	if errors.Is(err, sql.ErrNoRows) {
		l, err := resolveLimit(ctx, tx, key)
		return keyState{keyLimit: l}, err
	}
	if err != nil {
		return k, err
	}
	k.exists = true
	k.bucket.Interval = time.Duration(iv) * time.Microsecond
	if tat.Valid {
		k.bucket.TAT = time.UnixMicro(tat.Int64)
	}
	return k, nil
}

// resolveLimit finds the limit that governs key: its own, the longest
// template it matches, or the default (one at a time, no rate).
func resolveLimit(ctx context.Context, tx *sql.Tx, key string) (keyLimit, error) {
	var (
		l           keyLimit
		concurrency int
		iv          int64
	)
	err := tx.QueryRowContext(ctx, resolveLimitSQL, key).Scan(&l.limitKey, &concurrency, &iv, &l.bucket.Burst)
	if errors.Is(err, sql.ErrNoRows) {
		return keyLimit{maxRunning: 1, bucket: storekit.Bucket{Burst: 1}}, nil
	}
	l.maxRunning = storekit.MaxRunning(concurrency)
	l.bucket.Interval = time.Duration(iv) * time.Microsecond
	return l, err
}

// takeKey counts n jobs of key k started at now: the row (created if
// missing, with its limit) counts them running, and its bucket gives n
// tokens. It returns the bucket after.
func takeKey(ctx context.Context, tx *sql.Tx, key string, k keyState, n int, now time.Time) (storekit.Bucket, error) {
	b := k.bucket
	if n > 0 {
		b.Take(now, n)
	}
	_, err := tx.ExecContext(ctx, keyTakeSQL, key, n, k.maxRunning, k.limitKey, b.Interval.Microseconds(), max(b.Burst, 1), tatValue(b))
	return b, err
}

// tatValue is the tat column of bucket b.
func tatValue(b storekit.Bucket) any {
	if b.Interval <= 0 || b.TAT.IsZero() {
		return nil
	}
	return micros(b.TAT)
}

// PutLimit declares the limit of l.Key and applies it to the keys it
// governs.
func (s *Store) PutLimit(ctx context.Context, l readpast.Limit) (bool, error) {
	l, err := l.Normalize()
	if err != nil {
		return false, err
	}
	var created bool
	err = s.changeLimits(ctx, "put limit", l.Key, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, limitExistsSQL, l.Key).Scan(&n); err != nil {
			return err
		}
		created = n == 0
		_, err := tx.ExecContext(ctx, putLimitSQL, l.Key, l.Concurrency, l.Rate, l.Per.Microseconds(),
			max(l.Burst, 1), l.Interval().Microseconds(), micros(s.now()))
		return err
	})
	return created, err
}

// SetGroupLimit declares group's own limit with concurrency limit,
// keeping a rate it has, in one write transaction.
func (s *Store) SetGroupLimit(ctx context.Context, group string, limit int) error {
	if err := readpast.CheckGroupLimit(group, limit); err != nil {
		return err
	}
	return s.changeLimits(ctx, "set group limit", group, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, setGroupLimitSQL, group, limit, micros(s.now()))
		return err
	})
}

// DeleteLimit deletes the limit declared for key and gives the keys it
// governed the limit that governs them now.
func (s *Store) DeleteLimit(ctx context.Context, key string) error {
	if err := readpast.CheckLimitKey(key); err != nil {
		return err
	}
	return s.changeLimits(ctx, "delete limit", key, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, deleteLimitSQL, key)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return cmpErr(err, readpast.ErrLimitNotFound)
		}
		return nil
	})
}

// cmpErr is err, or fallback when err is nil.
func cmpErr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// changeLimits runs change, then gives every key row that key (a key or
// a template) may govern the limit that governs it now, and marks the
// keys whose limit changed at their first due jobs, in one write
// transaction.
func (s *Store) changeLimits(ctx context.Context, op, key string, change func(*sql.Tx) error) error {
	var changed bool
	err := s.writeTx(ctx, op, func(tx *sql.Tx) error {
		changed = false
		if err := change(tx); err != nil {
			return err
		}
		keys, err := queryStrings(ctx, tx, governedKeysSQL, key)
		if err != nil {
			return err
		}
		var marks []string
		for _, k := range keys {
			cur, err := readKey(ctx, tx, k)
			if err != nil {
				return err
			}
			l, err := resolveLimit(ctx, tx, k)
			if err != nil {
				return err
			}
			if l.limitKey == cur.limitKey && l.maxRunning == cur.maxRunning &&
				l.bucket.Interval == cur.bucket.Interval && l.bucket.Burst == cur.bucket.Burst {
				continue
			}
			if _, err := tx.ExecContext(ctx, setKeyLimitSQL, k, l.limitKey, l.maxRunning,
				l.bucket.Interval.Microseconds(), l.bucket.Burst); err != nil {
				return err
			}
			marks = append(marks, k)
		}
		changed = len(marks) > 0
		_, err = announceHeads(ctx, tx, marks, micros(s.now()))
		return err
	})
	if err != nil {
		return err
	}
	if changed {
		s.wake()
	}
	return nil
}

// queryStrings runs a query returning one text column.
func queryStrings(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// GetLimit returns the limit declared for key with its keys' states.
func (s *Store) GetLimit(ctx context.Context, key string) (*readpast.LimitInfo, error) {
	if err := readpast.CheckLimitKey(key); err != nil {
		return nil, err
	}
	ls, err := s.limits(ctx, key)
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

// limits reads the limit declared for key (every one when key is nil) in
// one read transaction, with the states of the keys each governs.
func (s *Store) limits(ctx context.Context, key any) ([]readpast.LimitInfo, error) {
	out := []readpast.LimitInfo{}
	err := s.readOp(ctx, "get limits", func(db *sql.DB) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		out = out[:0]
		rows, err := tx.QueryContext(ctx, listLimitsSQL, key)
		if err != nil {
			return err
		}
		for rows.Next() {
			var li readpast.LimitInfo
			var perUS int64
			if err := rows.Scan(&li.Key, &li.Concurrency, &li.Rate, &perUS, &li.Burst); err != nil {
				rows.Close()
				return err
			}
			if li.Rate > 0 {
				li.Per = time.Duration(perUS) * time.Microsecond
			} else {
				li.Burst = 0
			}
			out = append(out, li)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		now := s.now()
		for i := range out {
			if out[i].Keys, err = limitKeys(ctx, tx, out[i].Key, now); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// limitKeys reads the states of up to MaxLimitKeys keys the declared
// limit limitKey governs.
func limitKeys(ctx context.Context, tx *sql.Tx, limitKey string, now time.Time) ([]readpast.KeyState, error) {
	rows, err := tx.QueryContext(ctx, limitKeysSQL, limitKey, readpast.MaxLimitKeys)
	if err != nil {
		return nil, err
	}
	out := []readpast.KeyState{}
	for rows.Next() {
		var (
			key                 string
			running, maxRunning int
			iv                  int64
			b                   storekit.Bucket
			tat                 sql.NullInt64
		)
		if err := rows.Scan(&key, &running, &maxRunning, &iv, &b.Burst, &tat); err != nil {
			rows.Close()
			return nil, err
		}
		b.Interval = time.Duration(iv) * time.Microsecond
		if tat.Valid {
			b.TAT = time.UnixMicro(tat.Int64)
		}
		out = append(out, storekit.KeyState(now, key, limitKey, running, maxRunning, b))
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// TakeTokens takes n starts from key's bucket, all or none.
func (s *Store) TakeTokens(ctx context.Context, key string, n int) (readpast.TokenGrant, error) {
	if err := readpast.CheckKey(key); err != nil {
		return readpast.TokenGrant{}, err
	}
	if n < 1 || n > readpast.MaxTakeTokens {
		return readpast.TokenGrant{}, &readpast.FieldError{Field: "n", Message: fmt.Sprintf("must be between 1 and %d", readpast.MaxTakeTokens)}
	}
	var g readpast.TokenGrant
	err := s.writeTx(ctx, "take tokens", func(tx *sql.Tx) error {
		g = readpast.TokenGrant{}
		k, err := readKey(ctx, tx, key)
		if err != nil {
			return err
		}
		if k.bucket.Interval > 0 && n > k.bucket.Burst {
			return &readpast.FieldError{Field: "n",
				Message: fmt.Sprintf("asks for more than the burst of %s (%d): it can never be granted", key, k.bucket.Burst)}
		}
		now := s.now()
		b := k.bucket
		ok, at := b.Take(now, n)
		g.Granted, g.RetryAt = ok, at
		if !k.exists {
			_, err := takeKey(ctx, tx, key, k, 0, now)
			if err != nil {
				return err
			}
		}
		if ok && b.Interval > 0 {
			_, err = tx.ExecContext(ctx, setTatSQL, key, micros(b.TAT))
		}
		return err
	})
	return g, err
}
