package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// Limits per key (docs/design/flow-control.md), as on PostgreSQL: a key's
// row in readpast_groups carries the limit that governs it and its bucket
// (storekit.Bucket); declared limits live in readpast_limits. Writers are
// serialized, so every write transaction reads the newest rows and no
// window opens between a read and a write: a claim reads a key's row, or
// resolves the limit a missing row gets, and writes its count and bucket
// in the same transaction, on the time it records as the jobs' started_at.

// keyLimit is the limit that governs a key, as its row carries it.
type keyLimit struct {
	limitKey   sql.NullString // the declared key or template; NULL: the default
	maxRunning int            // storekit.UnboundedRunning for no bound
	bucket     storekit.Bucket
	weight     int // jobs a claim takes of the key in each of its rounds, at least 1
}

// defaultLimit governs a key no declared limit matches: one job at a
// time, no rate, weight 1.
var defaultLimit = keyLimit{maxRunning: 1, bucket: storekit.Bucket{Burst: 1}, weight: 1}

// keyState is a key's row, or what a missing row stands for: nothing
// running, a full bucket, and the limit that governs the key now.
type keyState struct {
	exists   bool
	running  int
	servedAt int64 // when the key's turn last moved: a claim took its weight's worth (Unix µs), or 0
	turnUsed int   // jobs claims took of the key since its turn last moved
	keyLimit
}

// free is how many more of the key's jobs may run now.
func (k keyState) free() int { return k.maxRunning - k.running }

// round is the round of a claim in which the key's i-th head (from 0)
// is: a claim takes up to weight heads of the key in each round, counted
// from the turnUsed jobs earlier claims took in the key's current turn
// (at most weight-1 of them: a weight lowered below turnUsed leaves the
// key its last job of the turn in the first round, not rounds behind).
func (k keyState) round(i int) int {
	w := max(k.weight, 1)
	return (i + min(k.turnUsed, w-1)) / w
}

// served is what a claim that takes n jobs of the key leaves of its turn:
// the jobs taken in the turn, and whether the turn moves (the key has
// started its weight's worth), keeping the rest.
func (k keyState) served(n int) (used int, moved bool) {
	w := max(k.weight, 1)
	u := min(k.turnUsed, w-1) // as round counts it, after a weight lowered below it
	return (u + n) % w, u+n >= w
}

// atMicros is t truncated to the microsecond, as the store records times:
// the bucket of a claim is kept on the very time its jobs record as
// started_at.
func atMicros(t time.Time) time.Time { return fromMicros(micros(t)) }

// bucketOf is the bucket of a key row's columns.
func bucketOf(intervalUS int64, burst int, tat sql.NullInt64) storekit.Bucket {
	b := storekit.Bucket{Interval: time.Duration(intervalUS) * time.Microsecond, Burst: burst}
	if tat.Valid {
		b.TAT = fromMicros(tat.Int64)
	}
	return b
}

// readKeys reads the rows of keys in tx and, for the keys that have none,
// resolves the limits a row created now would get, all in one statement.
func readKeys(ctx context.Context, tx *sql.Tx, keys []string) ([]keyState, error) {
	out := make([]keyState, len(keys))
	var missing []string
	for i, key := range keys {
		var (
			k     = &out[i]
			iv    int64
			burst int
			tat   sql.NullInt64
			sv    sql.NullInt64
		)
		err := tx.QueryRowContext(ctx, keyRowSQL, key).Scan(&k.running, &k.maxRunning, &k.limitKey, &iv, &burst, &k.weight, &tat, &sv, &k.turnUsed)
		if errors.Is(err, sql.ErrNoRows) {
			missing = append(missing, key)
			continue
		}
		if err != nil {
			return nil, err
		}
		k.exists = true
		k.servedAt = sv.Int64
		k.bucket = bucketOf(iv, burst, tat)
	}
	if len(missing) == 0 {
		return out, nil
	}
	ls, err := resolveLimits(ctx, tx, missing)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if !out[i].exists {
			out[i].keyLimit = ls[keys[i]]
		}
	}
	return out, nil
}

// readKey is readKeys of one key.
func readKey(ctx context.Context, tx *sql.Tx, key string) (keyState, error) {
	ks, err := readKeys(ctx, tx, []string{key})
	if err != nil {
		return keyState{}, err
	}
	return ks[0], nil
}

// resolveLimits finds the limit that governs each of keys: its own, else
// the longest template it matches (readpast.MatchLimit), else the
// default. It reads every template and the keys' own limits in one
// statement: templates are few, and a key's candidates (its prefixes)
// would cost a lookup each.
func resolveLimits(ctx context.Context, tx *sql.Tx, keys []string) (map[string]keyLimit, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	js, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, resolveLimitsSQL, string(js))
	if err != nil {
		return nil, err
	}
	declared := map[string]keyLimit{}
	var limits []readpast.Limit
	for rows.Next() {
		var (
			key         string
			concurrency int
			iv          int64
			burst       int
			weight      int
		)
		if err := rows.Scan(&key, &concurrency, &iv, &burst, &weight); err != nil {
			rows.Close()
			return nil, err
		}
		declared[key] = keyLimit{
			limitKey:   sql.NullString{String: key, Valid: true},
			maxRunning: storekit.MaxRunning(concurrency),
			bucket:     storekit.Bucket{Interval: time.Duration(iv) * time.Microsecond, Burst: burst},
			weight:     weight,
		}
		limits = append(limits, readpast.Limit{Key: key})
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	out := make(map[string]keyLimit, len(keys))
	for _, key := range keys {
		out[key] = defaultLimit
		if l, ok := readpast.MatchLimit(limits, key); ok {
			out[key] = declared[l.Key]
		}
	}
	return out, nil
}

// takeKey counts n jobs of key k (its stream: the key is their first)
// and also more that name it after the first, all started at now: its
// row (created if missing, with k's limit) counts them all running, and
// its bucket gives a token for each, which the claim made sure it has.
// Only the n count in the key's turn. It returns the bucket after, and
// whether the key's turn moved (keyState.served).
func takeKey(ctx context.Context, tx *sql.Tx, key string, k keyState, n, also int, now time.Time) (b storekit.Bucket, moved bool, err error) {
	b = k.bucket
	if ok, _ := b.Take(now, n+also); !ok {
		return b, false, fmt.Errorf("key %q: %d starts exceed its %d tokens", key, n+also, k.bucket.Tokens(now))
	}
	used, servedAt := -1, int64(0)
	if n > 0 {
		if used, moved = k.served(n); moved {
			servedAt = micros(now)
		}
	}
	return b, moved, saveKey(ctx, tx, key, k, n+also, b, servedAt, used)
}

// saveKey adds n to key's running count, stores bucket b's tat and, when
// servedAt is not 0, the time the key's turn moved, and, when used is not
// negative, the jobs taken in its turn; it creates the key's row with k's
// limit when it has none.
func saveKey(ctx context.Context, tx *sql.Tx, key string, k keyState, n int, b storekit.Bucket, servedAt int64, used int) error {
	var sv, u any
	if servedAt != 0 {
		sv = servedAt
	}
	if used >= 0 {
		u = used
	}
	_, err := tx.ExecContext(ctx, keySaveSQL, key, n, k.maxRunning, k.limitKey,
		b.Interval.Microseconds(), b.Burst, tatValue(b), sv, max(k.weight, 1), u)
	return err
}

// tatValue is the tat column of bucket b: NULL for a full bucket's zero.
func tatValue(b storekit.Bucket) any {
	if b.TAT.IsZero() {
		return nil
	}
	return micros(b.TAT)
}

// PutLimit declares the limit of l.Key (a key or a template) and applies
// it to the keys it governs, in one write transaction.
func (s *Store) PutLimit(ctx context.Context, l readpast.Limit) (bool, error) {
	l, err := l.Normalize()
	if err != nil {
		return false, err
	}
	var created bool
	err = s.changeLimits(ctx, "put limit", l.Key, func(tx *sql.Tx, now time.Time) error {
		_, found, err := declaredLimit(ctx, tx, l.Key)
		if err != nil {
			return err
		}
		created = !found
		return putLimit(ctx, tx, l, now)
	})
	return created, err
}

// SetGroupLimit declares group's own limit with concurrency limit,
// keeping a rate and a weight it has, in one write transaction.
func (s *Store) SetGroupLimit(ctx context.Context, group string, limit int) error {
	if err := readpast.CheckGroupLimit(group, limit); err != nil {
		return err
	}
	if err := readpast.CheckLimitKey(group); err != nil {
		return err
	}
	return s.changeLimits(ctx, "set group limit", group, func(tx *sql.Tx, now time.Time) error {
		l, _, err := declaredLimit(ctx, tx, group)
		if err != nil {
			return err
		}
		l.Key, l.Concurrency = group, limit
		if l, err = l.Normalize(); err != nil {
			return err
		}
		return putLimit(ctx, tx, l, now)
	})
}

// putLimit writes the declared limit l (normalized: its weight at least
// 1).
func putLimit(ctx context.Context, tx *sql.Tx, l readpast.Limit, now time.Time) error {
	_, err := tx.ExecContext(ctx, putLimitSQL, l.Key, l.Concurrency, l.Rate, l.Per.Microseconds(),
		max(l.Burst, 1), l.Interval().Microseconds(), micros(now), l.Weight)
	return err
}

// DeleteLimit deletes the limit declared for key and gives the keys it
// governed the limit that governs them now.
func (s *Store) DeleteLimit(ctx context.Context, key string) error {
	if err := readpast.CheckLimitKey(key); err != nil {
		return err
	}
	return s.changeLimits(ctx, "delete limit", key, func(tx *sql.Tx, _ time.Time) error {
		r, err := tx.ExecContext(ctx, deleteLimitSQL, key)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err == nil && n == 0 {
			return readpast.ErrLimitNotFound
		}
		return err
	})
}

// changeLimits runs change, then gives every key row that key (a key or
// a template) may govern the limit that governs it now, and marks the
// keys whose limit changed at their first due jobs, so that a raised
// limit or burst is used at once, and so the first keys that waited for
// one of them (keys.go): all in one write transaction. A row's
// running count and tat stay: a lowered limit preempts nothing. A change
// of the weight alone is a change too: the next claim reads it from the
// row.
func (s *Store) changeLimits(ctx context.Context, op, key string, change func(tx *sql.Tx, now time.Time) error) error {
	var (
		changed []string
		wake    wakeup
	)
	err := s.writeTx(ctx, op, func(tx *sql.Tx) error {
		changed = nil
		now := s.now()
		if err := change(tx, now); err != nil {
			return err
		}
		keys, curs, err := governedKeys(ctx, tx, key)
		if err != nil {
			return err
		}
		var wl waiterList
		ls, err := resolveLimits(ctx, tx, keys)
		if err != nil {
			return err
		}
		for i, k := range keys {
			cur, l := curs[i], ls[k]
			if l.limitKey == cur.limitKey && l.maxRunning == cur.maxRunning &&
				l.bucket.Interval == cur.bucket.Interval && l.bucket.Burst == cur.bucket.Burst &&
				l.weight == cur.weight {
				continue
			}
			cur.bucket.TAT = cur.bucket.Rescaled(now, l.bucket.Interval)
			var ws sql.NullString
			if err := tx.QueryRowContext(ctx, setKeyLimitSQL, k, l.limitKey, l.maxRunning,
				l.bucket.Interval.Microseconds(), l.bucket.Burst, tatValue(cur.bucket), l.weight).Scan(&ws); err != nil {
				return err
			}
			if err := wl.add(k, ws); err != nil {
				return err
			}
			changed = append(changed, k)
		}
		waiters, err := wl.take(ctx, tx)
		if err != nil {
			return err
		}
		wake, err = announceHeads(ctx, tx, withWaiters(slices.Clone(changed), waiters), nil, micros(now))
		return err
	})
	if errors.Is(err, readpast.ErrLimitNotFound) {
		return readpast.ErrLimitNotFound
	}
	if err != nil {
		return err
	}
	// A raised limit or burst gives slots or tokens now, a lowered rate
	// later: the marks say when.
	s.announce(wakeup{now: len(changed) > 0, later: wake.later})
	return nil
}

// governedKeys lists the key rows that key may govern, with the limits
// they carry: its own, or, for a template, every row whose key starts
// with its prefix (byte for byte, as readpast.MatchLimit matches), in key
// order. Rows are read from the prefix on by primary key and the walk
// stops at the first row past it.
func governedKeys(ctx context.Context, tx *sql.Tx, key string) ([]string, []keyLimit, error) {
	prefix, template := strings.CutSuffix(key, "*")
	if !template {
		prefix = key
	}
	rows, err := tx.QueryContext(ctx, keysFromSQL, prefix)
	if err != nil {
		return nil, nil, err
	}
	var (
		keys   []string
		limits []keyLimit
	)
	for rows.Next() {
		var (
			k     string
			l     keyLimit
			iv    int64
			burst int
			tat   sql.NullInt64
		)
		if err := rows.Scan(&k, &l.limitKey, &l.maxRunning, &iv, &burst, &l.weight, &tat); err != nil {
			rows.Close()
			return nil, nil, err
		}
		if !strings.HasPrefix(k, prefix) || !template && k != key {
			break
		}
		l.bucket = bucketOf(iv, burst, tat)
		keys, limits = append(keys, k), append(limits, l)
	}
	return keys, limits, errors.Join(rows.Err(), rows.Close())
}

// declaredLimit reads the limit declared for key, and whether there is
// one.
func declaredLimit(ctx context.Context, q querier, key string) (readpast.Limit, bool, error) {
	l, err := scanLimit(q.QueryRowContext(ctx, getLimitSQL, key))
	if errors.Is(err, sql.ErrNoRows) {
		return readpast.Limit{}, false, nil
	}
	return l, err == nil, err
}

// scanLimit reads a declared limit (key, concurrency, rate, per_us,
// burst, weight) as it was put (normalized: weight at least 1): per and
// burst only with a rate.
func scanLimit(r rowScanner) (readpast.Limit, error) {
	var (
		l     readpast.Limit
		perUS int64
	)
	if err := r.Scan(&l.Key, &l.Concurrency, &l.Rate, &perUS, &l.Burst, &l.Weight); err != nil {
		return readpast.Limit{}, err
	}
	if l.Rate > 0 {
		l.Per = time.Duration(perUS) * time.Microsecond
	} else {
		l.Burst = 0
	}
	return l, nil
}

// GetLimit returns the limit declared for key exactly (a key or a
// template) with the states of up to readpast.MaxLimitKeys keys it
// governs, or readpast.ErrLimitNotFound.
func (s *Store) GetLimit(ctx context.Context, key string) (*readpast.LimitInfo, error) {
	if err := readpast.CheckLimitKey(key); err != nil {
		return nil, err
	}
	ls, err := s.readLimits(ctx, "get limit", getLimitSQL, key)
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, readpast.ErrLimitNotFound
	}
	return &ls[0], nil
}

// ListLimits returns every declared limit by key, as GetLimit does.
func (s *Store) ListLimits(ctx context.Context) ([]readpast.LimitInfo, error) {
	return s.readLimits(ctx, "list limits", listLimitsSQL)
}

// readLimits reads the declared limits query returns, with the states of
// the keys each governs, in one read transaction.
func (s *Store) readLimits(ctx context.Context, op, query string, args ...any) ([]readpast.LimitInfo, error) {
	out := []readpast.LimitInfo{}
	err := s.readOp(ctx, op, func(db *sql.DB) error {
		out = out[:0]
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			l, err := scanLimit(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, readpast.LimitInfo{Limit: l})
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

// limitKeys reads the states at now of up to readpast.MaxLimitKeys keys
// the declared limit limitKey governs, by key.
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
			burst               int
			tat                 sql.NullInt64
		)
		if err := rows.Scan(&key, &running, &maxRunning, &iv, &burst, &tat); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, storekit.KeyState(now, key, limitKey, running, maxRunning, bucketOf(iv, burst, tat)))
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// TakeTokens takes n starts from key's bucket for work done outside jobs,
// all or none, on the store's clock, creating the key's row (with the
// limit that governs it) when it has none. A key without a rate always
// grants; n above a rate's burst can never be granted, and is refused as
// invalid, changing nothing.
func (s *Store) TakeTokens(ctx context.Context, key string, n int) (readpast.TokenGrant, error) {
	if err := readpast.CheckTake(key, n); err != nil {
		return readpast.TokenGrant{}, err
	}
	var (
		g     readpast.TokenGrant
		never error
	)
	err := s.writeTx(ctx, "take tokens", func(tx *sql.Tx) error {
		g, never = readpast.TokenGrant{}, nil
		k, err := readKey(ctx, tx, key)
		if err != nil {
			return err
		}
		if k.bucket.Interval > 0 && n > k.bucket.Burst {
			never = &readpast.FieldError{Field: "n",
				Message: fmt.Sprintf("asks for more than the burst of %s (%d): it can never be granted", key, k.bucket.Burst)}
			return never // rolls back: nothing changes
		}
		b := k.bucket
		ok, at := b.Take(atMicros(s.now()), n)
		g.Granted = ok
		if !ok {
			g.RetryAt = at.UTC()
		}
		if k.exists && (!ok || b.Interval <= 0) {
			return nil // nothing to write
		}
		return saveKey(ctx, tx, key, k, 0, b, 0, -1)
	})
	if never != nil {
		return readpast.TokenGrant{}, never
	}
	return g, err
}
