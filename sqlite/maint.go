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

// leaseExpiredMessage is the AttemptError message of a rescued claim.
const leaseExpiredMessage = "lease expired"

// RescueExpired ends up to limit claims whose lease has expired: each job
// records a "lease expired" attempt error and goes back to pending, at once
// claimable in its old place in claim order, when attempts remain,
// otherwise to history as failed; its group slot is freed.
// It returns how many claims it ended. A read-only probe keeps it off the
// write lock when nothing has expired. A limit below 1 is a
// *readpast.FieldError (field "limit"), as on PostgreSQL.
func (s *Store) RescueExpired(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	var expired bool
	if err := s.readOp(ctx, "rescue probe", func(db *sql.DB) error {
		return db.QueryRowContext(ctx, rescueProbeSQL, micros(s.now())).Scan(&expired)
	}); err != nil {
		return 0, err
	}
	if !expired {
		return 0, nil
	}
	var (
		n    int
		wake wakeup
	)
	err := s.writeTx(ctx, "rescue expired leases", func(tx *sql.Tx) error {
		var err error
		n, wake, err = s.rescueIn(ctx, tx, limit)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.announce(wakeup{now: n > 0, later: wake.later})
	return n, nil
}

// expiredClaim is one claim RescueExpired ends.
type expiredClaim struct {
	id                   int64
	token                string
	attempt, maxAttempts int
	errs, worker         string
	group, more          sql.NullString // its keys: group_key and more_keys
}

// rescueIn ends expired claims inside tx, and reports how many and the
// wake-up the slots it freed call for.
func (s *Store) rescueIn(ctx context.Context, tx *sql.Tx, limit int) (int, wakeup, error) {
	now := s.now()
	nowUS := micros(now)
	rows, err := tx.QueryContext(ctx, rescueFetchSQL, nowUS, limit)
	if err != nil {
		return 0, wakeup{}, err
	}
	var claims []expiredClaim
	for rows.Next() {
		var c expiredClaim
		if err := rows.Scan(&c.id, &c.token, &c.attempt, &c.maxAttempts, &c.errs, &c.worker, &c.group, &c.more); err != nil {
			rows.Close()
			return 0, wakeup{}, err
		}
		claims = append(claims, c)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, wakeup{}, err
	}
	groups := map[string]int{}
	for _, c := range claims {
		errs, err := appendError(c.errs, readpast.AttemptError{
			Attempt: c.attempt, At: fromMicros(nowUS), Message: leaseExpiredMessage, Worker: c.worker,
		})
		if err != nil {
			return 0, wakeup{}, err
		}
		if c.attempt < c.maxAttempts {
			if _, err := tx.ExecContext(ctx, requeueSQL, c.id, c.token, nil, errs); err != nil {
				return 0, wakeup{}, err
			}
			if err := markJobs(ctx, tx, []int64{c.id}); err != nil {
				return 0, wakeup{}, err
			}
		} else if _, err := moveToHistory(ctx, tx, c.id, readpast.StateFailed, errs, nowUS); err != nil {
			return 0, wakeup{}, err // RescueExpired wakes the claimers after any rescue
		}
		if err := freeJobKeys(groups, c.group, c.more); err != nil {
			return 0, wakeup{}, fmt.Errorf("job %d: %w", c.id, err)
		}
	}
	wake, err := freeSlots(ctx, tx, groups, nowUS)
	if err != nil {
		return 0, wakeup{}, err
	}
	return len(claims), wake, nil
}

// PruneGroups deletes up to limit rows of idle keys (nothing running and
// a full bucket: what a missing row means) and returns how many it
// deleted. A finisher deletes the row of a key it leaves idle; the rows
// left are those of keys whose bucket was not yet full then, or that
// TakeTokens created. Declared limits stay (readpast_limits): the claim
// that creates a key's row again gives it the limit that governs it then.
// RunRescuer calls it now and then.
func (s *Store) PruneGroups(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	var n int64
	err := s.writeTx(ctx, "prune groups", func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, pruneGroupsSQL, micros(s.now()), limit)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return int(n), err
}

// Prune deletes up to p.Limit history rows in p.State that finished before
// p.Before and returns how many it deleted.
func (s *Store) Prune(ctx context.Context, p readpast.PruneParams) (int, error) {
	p, err := p.Normalize()
	if err != nil {
		return 0, err
	}
	var n int
	err = s.writeTx(ctx, "prune", func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, pruneSQL, string(p.State), micros(p.Before), p.Limit, micros(s.now()))
		if err != nil {
			return err
		}
		var gone []deleted
		for rows.Next() {
			var d deleted
			if err := rows.Scan(&d.id, &d.key, &d.tags); err != nil {
				rows.Close()
				return err
			}
			gone = append(gone, d)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		n = len(gone)
		return dropWithJobs(ctx, tx, gone)
	})
	return n, err
}

// PauseQueue stops claims from taking queue's jobs.
func (s *Store) PauseQueue(ctx context.Context, queue string) error {
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	return s.writeTx(ctx, "pause queue", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, pauseQueueSQL, queue, micros(s.now()))
		return err
	})
}

// ResumeQueue lets claims take queue's jobs again.
func (s *Store) ResumeQueue(ctx context.Context, queue string) error {
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	var n int64
	err := s.writeTx(ctx, "resume queue", func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, resumeQueueSQL, queue)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err == nil && n > 0 {
		s.wake()
	}
	return err
}

// Queues lists every queue with jobs or paused.
func (s *Store) Queues(ctx context.Context) ([]readpast.QueueInfo, error) {
	stats, err := s.Stats(ctx)
	if err != nil {
		return nil, err
	}
	paused := map[string]time.Time{}
	err = s.readOp(ctx, "queues", func(db *sql.DB) error {
		clear(paused)
		rows, err := db.QueryContext(ctx, pausedQueuesSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var at int64
			if err := rows.Scan(&name, &at); err != nil {
				return err
			}
			paused[name] = fromMicros(at)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return storekit.QueueInfos(stats, paused), nil
}

// deleted is a history row just deleted: what must go with it.
type deleted struct {
	id   int64
	key  sql.NullString
	tags sql.NullString
}

// dropWithJobs deletes the tag rows of deleted jobs, their edges (as
// child, and as parent: those are resolved, since a parent that holds a
// child is never deleted) and the unique keys they still held (a key
// whose holder is gone holds nothing).
func dropWithJobs(ctx context.Context, tx *sql.Tx, gone []deleted) error {
	if len(gone) == 0 {
		return nil
	}
	ids := make([]int64, len(gone))
	for i, d := range gone {
		ids[i] = d.id
	}
	if _, err := tx.ExecContext(ctx, dropEdgesSQL, idsJSON(ids)); err != nil {
		return err
	}
	var keys, tags [][2]any
	for _, d := range gone {
		if d.key.Valid {
			keys = append(keys, [2]any{d.key.String, d.id})
		}
		for _, t := range splitTags(d.tags) {
			tags = append(tags, [2]any{t, d.id})
		}
	}
	for _, drop := range []struct {
		stmt string
		rows [][2]any
	}{{dropKeysSQL, keys}, {dropTagsSQL, tags}} {
		js, err := pairsJSON(drop.rows)
		if err != nil {
			return err
		}
		if js == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, drop.stmt, js); err != nil {
			return err
		}
	}
	return nil
}
