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
	"github.com/readpast/readpast/internal/storekit"
)

// Complete finishes running jobs as succeeded in one transaction, moving
// each from the live table to history. The result has one entry per
// completion: nil, readpast.ErrStaleToken, readpast.ErrNotFound, or a
// *readpast.FieldError for a result readpast.CheckResult rejects (that
// entry changes nothing; the rest of the batch still completes). Only the
// first entry for an id acts; a later one with the same token shares its
// outcome when that was nil (completing again is idempotent), and is
// otherwise ErrStaleToken (ErrNotFound for an unknown id), as is a later
// one with another token. No completions: (nil, nil).
func (s *Store) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	return s.settleTx(ctx, "complete", func(tx *sql.Tx) ([]error, wakeup, error) {
		return completeIn(ctx, tx, cs, s.now())
	})
}

// settleTx runs in, which settles a batch entry by entry, in one write
// transaction named op, and then wakes the claimers as in says (it freed
// or made pending something they can take, now or later).
func (s *Store) settleTx(ctx context.Context, op string, in func(*sql.Tx) ([]error, wakeup, error)) ([]error, error) {
	var (
		res  []error
		wake wakeup
	)
	err := s.writeTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		res, wake, err = in(tx)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.announce(wake)
	return res, nil
}

// completeIn applies completions inside tx in two set-based statements
// (the entries that matched no running job are then looked up one by one).
// Each (id, token) pair goes into the statements once (storekit.FirstPairs),
// and only the current token can match, so a job is moved, and its group
// slot freed, at most once per batch; an entry whose result
// readpast.CheckResult rejects gets that error and changes nothing, and
// repeats are settled by storekit.SettleRepeats. wake is the wake-up the
// freed group slots and released children call for.
func completeIn(ctx context.Context, tx *sql.Tx, cs []readpast.Completion, now time.Time) (res []error, wake wakeup, err error) {
	cs = canonTokens(cs, func(c *readpast.Completion) *string { return &c.Token })
	res = make([]error, len(cs))
	for i, c := range cs {
		res[i] = readpast.CheckResult(c.Result)
	}
	first := storekit.FirstPairs(len(cs), func(i int) (int64, string) { return cs[i].ID, cs[i].Token },
		func(i int) bool { return res[i] != nil })
	batch := make([][3]any, 0, len(cs))
	for i, c := range cs {
		if first[i] != i {
			continue
		}
		var result any
		if len(c.Result) > 0 {
			result = string(c.Result)
		}
		batch = append(batch, [3]any{c.ID, c.Token, result})
	}
	type pair struct {
		id    int64
		token string
	}
	moved := make(map[pair]bool, len(batch))
	var movedIDs, keyedIDs []int64
	groups := map[string]int{}
	if len(batch) > 0 {
		js, err := json.Marshal(batch)
		if err != nil {
			return nil, wakeup{}, err
		}
		rows, err := tx.QueryContext(ctx, completeMoveSQL, string(js), micros(now))
		if err != nil {
			return nil, wakeup{}, err
		}
		for rows.Next() {
			var (
				p           pair
				group, more sql.NullString
				keyed       bool
			)
			if err := rows.Scan(&p.id, &p.token, &group, &more, &keyed); err != nil {
				rows.Close()
				return nil, wakeup{}, err
			}
			moved[p] = true
			movedIDs = append(movedIDs, p.id)
			if keyed {
				keyedIDs = append(keyedIDs, p.id)
			}
			if err := freeJobKeys(groups, group, more); err != nil {
				rows.Close()
				return nil, wakeup{}, fmt.Errorf("job %d: %w", p.id, err)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, wakeup{}, err
		}
	}
	parents := false
	if len(movedIDs) > 0 {
		if parents, err = deleteLive(ctx, tx, deleteLiveManySQL, idsJSON(movedIDs)); err != nil {
			return nil, wakeup{}, err
		}
		if len(keyedIDs) > 0 {
			if err := releaseKeys(ctx, tx, keyedIDs, micros(now)); err != nil {
				return nil, wakeup{}, err
			}
		}
	}
	for i, c := range cs {
		if first[i] != i || moved[pair{c.ID, c.Token}] {
			continue
		}
		if res[i], err = entryErr(lookup(ctx, tx, c.ID, c.Token, readpast.StateSucceeded)); err != nil {
			return nil, wakeup{}, err
		}
	}
	storekit.SettleRepeats(res, first, true)
	if wake, err = freeSlots(ctx, tx, groups, micros(now)); err != nil {
		return nil, wakeup{}, err
	}
	wake.now = wake.now || parents
	return res, wake, nil
}

// deleteLive runs query, deleteLiveSQL or deleteLiveManySQL with arg, and
// reports whether a row it deleted was a parent: its edges were resolved
// by the delete's trigger, which may have made children pending.
func deleteLive(ctx context.Context, tx *sql.Tx, query string, arg any) (parent bool, err error) {
	rows, err := tx.QueryContext(ctx, query, arg)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var p bool
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return false, err
		}
		parent = parent || p
	}
	return parent, errors.Join(rows.Err(), rows.Close())
}

// entryErr splits lookup's answer into a per-entry outcome and a failure.
func entryErr(err error) (entry, fatal error) {
	if err == nil || isEntryErr(err) {
		return err, nil
	}
	return nil, err
}

// Fail records failed attempts in one transaction: a job with attempts left
// (and not Discard) goes back to pending at RetryAt (zero: now), otherwise
// it moves to history as failed. Message and stack are stored as
// readpast.Failure.Normalize makes them. One entry per failure: nil,
// readpast.ErrStaleToken or readpast.ErrNotFound. Only the first entry for
// an id acts; any later entry for it, whatever its token, is
// ErrStaleToken (ErrNotFound for an unknown id), since the first one
// either ended that claim or found it stale. No failures: (nil, nil).
func (s *Store) Fail(ctx context.Context, fs []readpast.Failure) ([]error, error) {
	if len(fs) == 0 {
		return nil, nil
	}
	res, err := s.settleTx(ctx, "fail", func(tx *sql.Tx) ([]error, wakeup, error) {
		return s.failIn(ctx, tx, fs, s.now())
	})
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		s.dueAt(time.Now(), f.RetryAt) // this store's claimers take the retry when it is due
	}
	return res, nil
}

// failIn applies failures inside tx in order, each (id, token) pair once
// (storekit.FirstPairs): only the current token matches, and once it has
// acted the claim is over, so no job is failed, and no group slot freed,
// twice in a batch.
// wake is the wake-up the jobs made pending and the freed group slots
// call for.
func (s *Store) failIn(ctx context.Context, tx *sql.Tx, fs []readpast.Failure, now time.Time) (res []error, wake wakeup, err error) {
	fs = canonTokens(fs, func(f *readpast.Failure) *string { return &f.Token })
	nowUS := micros(now)
	at := fromMicros(nowUS)
	res = make([]error, len(fs))
	for i, f := range fs {
		res[i] = f.Check()
	}
	groups := map[string]int{}
	first := storekit.FirstPairs(len(fs), func(i int) (int64, string) { return fs[i].ID, fs[i].Token },
		func(i int) bool { return res[i] != nil })
	for i, f := range fs {
		if first[i] != i {
			continue // a repeated pair: settled by SettleRepeats below
		}
		f = f.Normalize()
		var (
			attempt, maxAttempts int
			errs, worker         string
			group, more          sql.NullString
		)
		err := tx.QueryRowContext(ctx, runningJobSQL, f.ID, f.Token).Scan(&attempt, &maxAttempts, &errs, &worker, &group, &more)
		if errors.Is(err, sql.ErrNoRows) {
			if res[i], err = entryErr(lookup(ctx, tx, f.ID, f.Token, "")); err != nil {
				return nil, wakeup{}, err
			}
			continue
		}
		if err != nil {
			return nil, wakeup{}, err
		}
		newErrs, err := appendError(errs, readpast.AttemptError{
			Attempt: attempt, At: at, Message: f.Message, Stack: f.Stack, Worker: worker,
		})
		if err != nil {
			return nil, wakeup{}, fmt.Errorf("job %d: %w", f.ID, err)
		}
		if attempt < maxAttempts && !f.Discard {
			retryAt := nowUS
			if !f.RetryAt.IsZero() {
				retryAt = micros(f.RetryAt)
			}
			if _, err := tx.ExecContext(ctx, requeueSQL, f.ID, f.Token, retryAt, newErrs); err != nil {
				return nil, wakeup{}, err
			}
			if err := markJobs(ctx, tx, []int64{f.ID}); err != nil {
				return nil, wakeup{}, err
			}
			wake.now = true
		} else {
			parent, err := moveToHistory(ctx, tx, f.ID, readpast.StateFailed, newErrs, nowUS)
			if err != nil {
				return nil, wakeup{}, err
			}
			wake.now = wake.now || parent
		}
		if err := freeJobKeys(groups, group, more); err != nil {
			return nil, wakeup{}, fmt.Errorf("job %d: %w", f.ID, err)
		}
	}
	storekit.SettleRepeats(res, first, false)
	marked, err := freeSlots(ctx, tx, groups, nowUS)
	if err != nil {
		return nil, wakeup{}, err
	}
	return res, wake.or(marked), nil
}

// moveToHistory moves live job id to history in state, with errs (nil
// keeps its errors), and reports whether it was a parent: its edges were
// resolved (migrations/0013_flows.sql), which may have made children
// pending.
func moveToHistory(ctx context.Context, tx *sql.Tx, id int64, state readpast.JobState, errs any, nowUS int64) (parent bool, err error) {
	var keyed bool
	if err := tx.QueryRowContext(ctx, moveToHistorySQL, id, string(state), errs, nowUS).Scan(&keyed); err != nil {
		return false, err
	}
	if parent, err = deleteLive(ctx, tx, deleteLiveSQL, id); err != nil {
		return false, err
	}
	if !keyed {
		return parent, nil
	}
	return parent, releaseKeys(ctx, tx, []int64{id}, nowUS)
}

// Extend renews a running job's lease to now+lease and returns the new
// expiry; readpast.ErrStaleToken or readpast.ErrNotFound when the claim is
// not current.
func (s *Store) Extend(ctx context.Context, id int64, token string, lease time.Duration) (time.Time, error) {
	if err := readpast.CheckLease(lease); err != nil {
		return time.Time{}, err
	}
	token = storekit.CanonToken(token)
	var expires int64
	err := s.writeTx(ctx, "extend", func(tx *sql.Tx) error {
		expires = micros(s.now().Add(lease))
		r, err := tx.ExecContext(ctx, extendSQL, id, token, expires)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return lookup(ctx, tx, id, token, "")
	})
	if err != nil {
		return time.Time{}, err
	}
	return fromMicros(expires), nil
}

// Release gives a running job back unworked: pending and claimable at once
// (in its old place in claim order), its attempt not counted, its group
// slot freed.
func (s *Store) Release(ctx context.Context, id int64, token string) error {
	token = storekit.CanonToken(token)
	var wake wakeup
	err := s.writeTx(ctx, "release", func(tx *sql.Tx) error {
		var group, more sql.NullString
		err := tx.QueryRowContext(ctx, releaseSQL, id, token).Scan(&group, &more)
		if errors.Is(err, sql.ErrNoRows) {
			return lookup(ctx, tx, id, token, "")
		}
		if err != nil {
			return err
		}
		if err := markJobs(ctx, tx, []int64{id}); err != nil {
			return err
		}
		w, err := freeJobSlots(ctx, tx, group, more, micros(s.now()))
		wake = wakeup{now: true}.or(w)
		return err
	})
	if err != nil {
		return err
	}
	s.announce(wake)
	return nil
}

// Snooze puts a running job back to pending at now+d, its attempt not
// counted and its snoozes one more, and frees its group slot; fenced by
// the token like Release.
func (s *Store) Snooze(ctx context.Context, id int64, token string, d time.Duration) error {
	if err := readpast.CheckSnooze(d); err != nil {
		return err
	}
	token = storekit.CanonToken(token)
	var wake wakeup
	err := s.writeTx(ctx, "snooze", func(tx *sql.Tx) error {
		nowUS := micros(s.now())
		var group, more sql.NullString
		err := tx.QueryRowContext(ctx, snoozeSQL, id, token, nowUS+d.Microseconds()).Scan(&group, &more)
		if errors.Is(err, sql.ErrNoRows) {
			return lookup(ctx, tx, id, token, "")
		}
		if err != nil {
			return err
		}
		if err := markJobs(ctx, tx, []int64{id}); err != nil {
			return err
		}
		w, err := freeJobSlots(ctx, tx, group, more, nowUS)
		wake = wakeup{now: true}.or(w)
		return err
	})
	if err != nil {
		return err
	}
	s.dueAt(time.Now(), time.Now().Add(d))
	s.announce(wake)
	return nil
}

// freeJobSlots frees a slot of every key of one job that stopped running
// (its group, and its more_keys) and marks their next jobs (freeSlots).
func freeJobSlots(ctx context.Context, tx *sql.Tx, group, more sql.NullString, nowUS int64) (wakeup, error) {
	if !group.Valid {
		return wakeup{}, nil
	}
	freed := map[string]int{}
	if err := freeJobKeys(freed, group, more); err != nil {
		return wakeup{}, err
	}
	return freeSlots(ctx, tx, freed, nowUS)
}

// canonTokens returns xs with each token, which token points to, in the
// form claims hand tokens out (storekit.CanonToken); a copy when any
// changes, the caller's slice left as it is.
func canonTokens[T any](xs []T, token func(*T) *string) []T {
	copied := false
	for i := range xs {
		t := storekit.CanonToken(*token(&xs[i]))
		if t == *token(&xs[i]) {
			continue
		}
		if !copied {
			xs, copied = slices.Clone(xs), true
		}
		*token(&xs[i]) = t
	}
	return xs
}
