package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/cursor"
	"github.com/readpast/readpast/internal/storekit"
)

// cancelAttempts bounds the statements of one Cancel or CancelPending:
// each one after the first follows a job that became live (or pending)
// after a statement's snapshot, which a job does only a few times in a row.
const cancelAttempts = 5

// Cancel moves a live job to cancelled.
func (s *Store) Cancel(ctx context.Context, id int64) (*readpast.Job, error) {
	return s.cancel(ctx, id, false, nil)
}

// CancelClaimed cancels job id as Cancel does, only while it runs under
// token (sql/cancel.sql with a token): the worker of an attempt cancelling
// its own job. Any other token, or a job no longer running under it, is
// readpast.ErrStaleToken and changes nothing, except a job already
// cancelled under this token, which is returned as it is (a repeat);
// an unknown id is readpast.ErrNotFound.
func (s *Store) CancelClaimed(ctx context.Context, id int64, token string) (*readpast.Job, error) {
	tok, ok := canonToken(token)
	if !ok {
		return nil, s.staleOrMissing(ctx, id)
	}
	return s.cancel(ctx, id, false, &tok)
}

// CancelPending cancels job id as Cancel does, only while it is pending
// (sql/cancel.sql with "only pending"): a job a claim holds is waited for
// and, running by then, left alone. Any state but pending is refused with
// readpast.ErrInvalidState naming it; an unknown id is readpast.ErrNotFound.
func (s *Store) CancelPending(ctx context.Context, id int64) (*readpast.Job, error) {
	return s.cancel(ctx, id, true, nil)
}

// cancel is Cancel, CancelPending with onlyPending, or CancelClaimed
// with a token.
func (s *Store) cancel(ctx context.Context, id int64, onlyPending bool, token *string) (*readpast.Job, error) {
	op := "cancel"
	if onlyPending {
		op = "cancel pending"
	} else if token != nil {
		op = "cancel claimed"
	}
	// A cancelled parent may release children under run_anyway, ahead
	// of a claim position (claimfrom.go): the next claims are full ones,
	// then the claimers wake.
	defer s.pendingAgain()
	for attempt := 1; ; attempt++ {
		j, err := retryDeadlock(ctx, func() (*readpast.Job, error) {
			return scanJob(s.pool.QueryRow(ctx, cancelSQL, id, onlyPending, token))
		})
		if errors.Is(err, pgx.ErrNoRows) && token != nil {
			// The statement re-checked the token on the row as any
			// writer holding it left it: not the current claim. Unless
			// the job was cancelled under it: a worker's cancel sent
			// again (its answer lost), accepted, changing nothing.
			old, gerr := s.Get(ctx, id)
			if gerr != nil {
				return nil, gerr
			}
			if old.State == readpast.StateCancelled && old.Token == *token {
				return old, nil
			}
			return nil, readpast.ErrStaleToken
		}
		if errors.Is(err, pgx.ErrNoRows) {
			// Not matched in the statement's snapshot (finished, unknown,
			// running for CancelPending) or as a claim left it.
			old, gerr := s.Get(ctx, id)
			if gerr != nil {
				return nil, gerr
			}
			if old.State != readpast.StatePending && (onlyPending || old.State.Final()) {
				return nil, fmt.Errorf("job %d is %s: %w", id, old.State, readpast.ErrInvalidState)
			}
			// It became live (or pending) after the snapshot: retried
			// from history, or released.
			if attempt == cancelAttempts {
				return nil, fmt.Errorf("%s: job %d changed under each of %d attempts; try again", op, id, attempt)
			}
			continue
		}
		if err != nil {
			return nil, opErr(op, err)
		}
		if j.Group != nil {
			// The job is cancelled either way: the error says so.
			if err := s.markGroupHeads(ctx, *j.Group); err != nil {
				return j, fmt.Errorf("%s: job %d cancelled, then %w", op, id, classify(err))
			}
		}
		return j, nil
	}
}

// Retry makes a failed, cancelled or pending job pending now. A job that
// comes back from history takes its unique key again; when another job
// holds it, Retry changes nothing and returns readpast.ErrInvalidState
// naming the holder.
func (s *Store) Retry(ctx context.Context, id int64) (*readpast.Job, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	j, err := retryDeadlock(ctx, func() (*readpast.Job, error) { return scanJob(s.pool.QueryRow(ctx, retrySQL, id)) })
	if errors.Is(err, pgx.ErrNoRows) {
		old, gerr := s.Get(ctx, id)
		if gerr != nil {
			return nil, gerr
		}
		if (old.State == readpast.StateFailed || old.State == readpast.StateCancelled) && old.UniqueKey != "" {
			var holder int64
			if err := s.pool.QueryRow(ctx, uniqueHolderSQL, old.UniqueKey).Scan(&holder); err == nil && holder != id {
				return nil, fmt.Errorf("job %d: its unique key %q is held by job %d: %w", id, old.UniqueKey, holder, readpast.ErrInvalidState)
			}
		}
		return nil, fmt.Errorf("job %d is %s: %w", id, old.State, readpast.ErrInvalidState)
	}
	if err != nil {
		return nil, opErr("retry", err)
	}
	s.pendingAgain()
	return j, nil
}

// Get returns a live or finished job.
func (s *Store) Get(ctx context.Context, id int64) (*readpast.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, getSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
	}
	if err != nil {
		return nil, opErr(fmt.Sprintf("get job %d", id), err)
	}
	return j, nil
}

// List returns jobs matching p, newest first.
func (s *Store) List(ctx context.Context, p readpast.ListParams) (readpast.ListResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.ListResult{}, err
	}
	var after int64
	if p.Cursor != "" {
		after, _ = cursor.Decode(p.Cursor)
	}
	// One row more than the page says whether another page follows.
	var rows pgx.Rows
	if p.Tag != "" {
		if after == 0 {
			after = math.MaxInt64
		}
		rows, err = s.pool.Query(ctx, listTagSQL, p.Queue, string(p.State), p.Kind, p.Group, after, p.Limit+1, p.Tag)
	} else {
		rows, err = s.pool.Query(ctx, listSQL, p.Queue, string(p.State), p.Kind, p.Group, after, p.Limit+1)
	}
	if err != nil {
		return readpast.ListResult{}, opErr("list", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return readpast.ListResult{}, opErr("list", err)
	}
	res := readpast.ListResult{Jobs: jobs}
	if len(jobs) > p.Limit {
		res.Jobs = jobs[:p.Limit]
		res.Next = cursor.Encode(res.Jobs[p.Limit-1].ID)
	}
	return res, nil
}

// Stats counts jobs per queue and state.
func (s *Store) Stats(ctx context.Context) ([]readpast.QueueStats, error) {
	rows, err := s.pool.Query(ctx, statsSQL)
	if err != nil {
		return nil, opErr("stats", err)
	}
	defer rows.Close()
	var out []readpast.QueueStats
	for rows.Next() {
		var st readpast.QueueStats
		var state string
		if err := rows.Scan(&st.Queue, &state, &st.Count); err != nil {
			return nil, opErr("stats", err)
		}
		st.State = readpast.JobState(state)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("stats", err)
	}
	storekit.SortStats(out)
	return out, nil
}

// RescueExpired ends up to limit expired claims in one statement. It reads
// the leases that expired since its last complete scan, with a full scan at
// least every second (claimfrom.go).
func (s *Store) RescueExpired(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	began := time.Now()
	stmt, args := rescueSQL, []any{s.hotMode, limit}
	after, positioned := s.rescueFrom.start(began)
	if positioned {
		stmt, args = rescueFromSQL, append(args, after)
	}
	var at time.Time
	n, err := retryDeadlock(ctx, func() (n int, err error) {
		err = s.pool.QueryRow(ctx, stmt, args...).Scan(&n, &at)
		return n, err
	})
	if err != nil {
		return 0, opErr("rescue", err)
	}
	s.rescueFrom.scanned(positioned, began, n, limit, at)
	if n > 0 {
		s.pendingAgain() // rescued jobs are pending at their old place
	}
	return n, nil
}

// PruneGroups deletes up to limit rows of idle keys (nothing running, a
// full bucket: what a missing row means) and returns how many it deleted.
// Rows other transactions hold are skipped, and it never makes an enqueue
// or a claim wait. Declared limits stay (readpast_limits): the claim that
// creates a key's row again gives it the limit that governs it then.
// RunRescuer calls it now and then.
func (s *Store) PruneGroups(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	// A key counts its running jobs on its row until the slots counted
	// aside since (keys without a bound, or with room) are folded into it.
	if err := s.foldFreed(ctx); err != nil {
		return 0, err
	}
	// A wait PostgreSQL makes despite SKIP LOCKED (for the holder of a
	// row's newer version) ends after lockWaitTimeout, and this call
	// prunes nothing: claims would pass over the rows held meanwhile.
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := setLockTimeout(ctx, tx, lockWaitTimeout); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, pruneGroupsSQL, limit)
		n = tag.RowsAffected()
		return err
	})
	if lockWaitEnded(err) {
		return 0, nil
	}
	if err != nil {
		return 0, opErr("prune groups", err)
	}
	return int(n), nil
}

// Prune deletes one batch of old finished jobs.
func (s *Store) Prune(ctx context.Context, p readpast.PruneParams) (int, error) {
	p, err := p.Normalize()
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, pruneSQL, string(p.State), p.Before, p.Limit).Scan(&n); err != nil {
		return 0, opErr("prune", err)
	}
	return n, nil
}

// PauseQueue stops claims from taking queue's jobs (sql/pause_queue.sql):
// once it returns, no claim takes one. It waits for the claims of queue
// in flight to end; claims never wait for it.
func (s *Store) PauseQueue(ctx context.Context, queue string) error {
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	// Under a stricter default isolation a pause racing another pause or
	// resume of the queue can fail to serialize: retried, as a deadlock is.
	_, err := retryDeadlock(ctx, func() (pgconn.CommandTag, error) { return s.pool.Exec(ctx, pauseQueueSQL, queue) })
	if err != nil {
		return opErr("pause queue", err)
	}
	return nil
}

// ResumeQueue lets claims take queue's jobs again.
func (s *Store) ResumeQueue(ctx context.Context, queue string) error {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	n, err := retryDeadlock(ctx, func() (int, error) {
		var n int
		err := s.pool.QueryRow(ctx, resumeQueueSQL, queue).Scan(&n)
		return n, err
	})
	if err != nil {
		return opErr("resume queue", err)
	}
	if n > 0 {
		s.pendingAgain()
	}
	return nil
}

// Queues lists every queue with jobs or paused.
func (s *Store) Queues(ctx context.Context) ([]readpast.QueueInfo, error) {
	stats, err := s.Stats(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, pausedQueuesSQL)
	if err != nil {
		return nil, opErr("queues", err)
	}
	defer rows.Close()
	paused := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return nil, opErr("queues", err)
		}
		paused[name] = at
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("queues", err)
	}
	return storekit.QueueInfos(stats, paused), nil
}
