package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// Enqueue inserts jobs in one transaction (all or none), in multi-row
// INSERTs of up to 1000 rows, and returns them in order. No jobs: (nil, nil).
func (s *Store) Enqueue(ctx context.Context, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	norm, err := normalizeJobs(jobs, s.now())
	if err != nil {
		return nil, err
	}
	var out []*readpast.Job
	err = s.writeTx(ctx, "enqueue", func(tx *sql.Tx) error {
		var err error
		out, err = enqueueIn(ctx, tx, norm, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wake()
	s.dueLater(out)
	return out, nil
}

// normalizeJobs applies the readpast defaults and checks to every job.
func normalizeJobs(jobs []readpast.EnqueueParams, now time.Time) ([]readpast.EnqueueParams, error) {
	norm := make([]readpast.EnqueueParams, len(jobs))
	for i, p := range jobs {
		n, err := p.Normalize(now)
		if err != nil {
			return nil, fmt.Errorf("sqlite: enqueue job %d: %w", i, err)
		}
		n.Payload = slices.Clone(n.Payload)
		norm[i] = n
	}
	return norm, nil
}

// insertJobs inserts normalized jobs in tx, in chunks of enqueueChunk rows.
func insertJobs(ctx context.Context, tx *sql.Tx, jobs []readpast.EnqueueParams, now time.Time) ([]*readpast.Job, error) {
	return insertRows(ctx, tx, jobs, nil, now)
}

// flowRow is what a job of a flow is stored with besides its
// EnqueueParams: its edges to wait for (blocked when more than 0), and
// whether an edge names it as parent.
type flowRow struct {
	waitingOn   int
	hasChildren bool
}

// insertRows is insertJobs, for the jobs of a flow when flow is not nil
// (one entry per job).
func insertRows(ctx context.Context, tx *sql.Tx, jobs []readpast.EnqueueParams, flow []flowRow, now time.Time) ([]*readpast.Job, error) {
	nowUS := micros(now)
	created := fromMicros(nowUS)
	out := make([]*readpast.Job, 0, len(jobs))
	var tagRows [][2]any
	traced := slices.ContainsFunc(jobs, func(p readpast.EnqueueParams) bool { return p.Traceparent != "" })
	keyed := slices.ContainsFunc(jobs, func(p readpast.EnqueueParams) bool { return len(p.Keys) > 1 })
	insert, row, perRow := enqueueInsertSQL, enqueueRowSQL, enqueueRowParams
	switch {
	case flow != nil:
		insert, row, perRow, traced, keyed = enqueueFlowInsertSQL, enqueueFlowRowSQL, enqueueRowParams+6, true, true
	case keyed:
		insert, row, perRow, traced = enqueueKeyedInsertSQL, enqueueKeyedRowSQL, enqueueRowParams+3, true
	case traced:
		insert, row, perRow = enqueueTracedInsertSQL, enqueueTracedRowSQL, enqueueRowParams+2
	}
	for start := 0; start < len(jobs); start += enqueueChunk {
		part := jobs[start:min(start+enqueueChunk, len(jobs))]
		query := insert + strings.Repeat(row+", ", len(part)-1) + row + enqueueReturningSQL
		args := make([]any, 0, len(part)*perRow)
		for k, p := range part {
			args = append(args, p.Queue, p.Kind, string(p.Payload), p.Priority, micros(p.RunAt),
				p.MaxAttempts, nullString(p.Group), nowUS, nullString(p.UniqueKey), uniqueUntil(p, nowUS), joinTags(p.Tags))
			if traced {
				args = append(args, nullString(p.Traceparent), nullString(p.Tracestate))
			}
			if keyed {
				more, err := moreKeysValue(p.Keys)
				if err != nil {
					return nil, err
				}
				args = append(args, more)
			}
			if flow != nil {
				f := flow[start+k]
				args = append(args, string(flowState(f)), f.waitingOn, f.hasChildren)
			}
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, err
		}
		ids := make([]int64, 0, len(part))
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		if len(ids) != len(part) {
			return nil, fmt.Errorf("inserted %d jobs, got %d ids back", len(part), len(ids))
		}
		// Rows get increasing ids in VALUES order; RETURNING's order is
		// unspecified, so sort.
		slices.Sort(ids)
		for i, p := range part {
			j := &readpast.Job{
				ID:          ids[i],
				Queue:       p.Queue,
				Kind:        p.Kind,
				Payload:     p.Payload,
				Priority:    p.Priority,
				State:       readpast.StatePending,
				MaxAttempts: p.MaxAttempts,
				RunAt:       fromMicros(micros(p.RunAt)),
				CreatedAt:   created,
				Errors:      []readpast.AttemptError{},
				Tags:        []string{},
				Traceparent: p.Traceparent,
				Tracestate:  p.Tracestate,
			}
			for _, t := range p.Tags {
				j.Tags = append(j.Tags, t)
				tagRows = append(tagRows, [2]any{t, ids[i]})
			}
			if flow != nil {
				j.State = flowState(flow[start+i])
			}
			if p.Group != "" {
				g := p.Group
				j.Group = &g
				j.Keys = []string{g}
				if len(p.Keys) > 1 {
					j.Keys = slices.Clone(p.Keys)
				}
			}
			j.UniqueKey = p.UniqueKey
			if u, ok := uniqueUntil(p, nowUS).(int64); ok {
				j.UniqueUntil = optTime(sql.NullInt64{Int64: u, Valid: true})
			}
			out = append(out, j)
		}
	}
	if err := insertMarks(ctx, tx, enqueueMarks(out, nowUS)); err != nil {
		return nil, err
	}
	if js, err := pairsJSON(tagRows); err != nil {
		return nil, err
	} else if js != "" {
		if _, err := tx.ExecContext(ctx, insertTagsSQL, js); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// enqueueMarks picks the ready marks of newly enqueued jobs: per group and
// queue, the first due job in claim order, and every job not yet due. The
// later due jobs of a group need none: they commit with the first one, so
// whoever decides on the group through its mark sees them, and marks the
// next of them while a slot is free.
func enqueueMarks(jobs []*readpast.Job, nowUS int64) []candidate {
	type key struct{ group, queue string }
	first := map[key]candidate{}
	var marks []candidate
	for _, j := range jobs {
		if j.Group == nil || j.State != readpast.StatePending {
			continue // a blocked job is marked when it is released
		}
		c := candidate{id: j.ID, runAt: micros(j.RunAt), priority: j.Priority, queue: j.Queue, group: *j.Group}
		if c.runAt > nowUS {
			marks = append(marks, c)
			continue
		}
		k := key{c.group, c.queue}
		if f, ok := first[k]; !ok || claimOrder(c, f) < 0 {
			first[k] = c
		}
	}
	for _, c := range first {
		marks = append(marks, c)
	}
	return marks
}

// Cancel moves a pending or running job to history as cancelled (a running
// job's token stops being current and its group slot is freed).
// readpast.ErrInvalidState for a finished job, readpast.ErrNotFound for an
// unknown id.
func (s *Store) Cancel(ctx context.Context, id int64) (*readpast.Job, error) {
	return s.cancel(ctx, "cancel", id, false, "")
}

// CancelClaimed cancels job id as Cancel does, only while it runs under
// token: the worker of an attempt cancelling its own job. Any other
// token, or a job no longer running under it, is readpast.ErrStaleToken
// and changes nothing, except a job already cancelled under this token,
// which is returned as it is (a repeat); an unknown id is
// readpast.ErrNotFound.
func (s *Store) CancelClaimed(ctx context.Context, id int64, token string) (*readpast.Job, error) {
	if token == "" {
		// No claim has it; and to cancel, "" means no token at all.
		return nil, lookup(ctx, s.read, id, token, "")
	}
	return s.cancel(ctx, "cancel claimed", id, false, storekit.CanonToken(token))
}

// CancelPending cancels job id as Cancel does, only while it is pending:
// a running or finished job is left alone and refused with
// readpast.ErrInvalidState naming its state. The state is read in the
// write transaction, so a claim of the job commits either before it (the
// job is running: refused) or after it (the job is cancelled: the claim
// does not find it).
func (s *Store) CancelPending(ctx context.Context, id int64) (*readpast.Job, error) {
	return s.cancel(ctx, "cancel pending", id, true, "")
}

// cancel is Cancel, CancelPending with onlyPending, or CancelClaimed with
// a token.
func (s *Store) cancel(ctx context.Context, op string, id int64, onlyPending bool, token string) (*readpast.Job, error) {
	var (
		job  *readpast.Job
		wake wakeup
	)
	err := s.writeTx(ctx, op, func(tx *sql.Tx) error {
		var err error
		if wake, err = cancelIn(ctx, tx, id, micros(s.now()), onlyPending, token); err != nil {
			return err
		}
		job, err = scanJob(tx.QueryRowContext(ctx, getHistorySQL, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.announce(wake)
	return job, nil
}

// cancelIn cancels live job id inside tx (with onlyPending, only a pending
// one: any other state is readpast.ErrInvalidState naming it; with a
// token, only while it runs under that claim: otherwise
// readpast.ErrStaleToken) and reports
// the wake-up it calls for: it freed a group slot and marked the group's
// next jobs, or resolved the edges of a parent (which may have released
// children).
func cancelIn(ctx context.Context, tx *sql.Tx, id int64, nowUS int64, onlyPending bool, token string) (wake wakeup, err error) {
	var (
		state, tok  string
		group, more sql.NullString
	)
	err = tx.QueryRowContext(ctx, cancelStateSQL, id).Scan(&state, &group, &more, &tok)
	if errors.Is(err, sql.ErrNoRows) && token != "" {
		// A worker's cancel sent again (its answer lost) finds the job
		// cancelled under its token: accepted, changing nothing.
		return wakeup{}, lookup(ctx, tx, id, token, readpast.StateCancelled)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return wakeup{}, historyErr(ctx, tx, id)
	}
	if err != nil {
		return wakeup{}, err
	}
	if token != "" && (readpast.JobState(state) != readpast.StateRunning || tok != token) {
		return wakeup{}, readpast.ErrStaleToken
	}
	if onlyPending && readpast.JobState(state) != readpast.StatePending {
		return wakeup{}, fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
	}
	parent, err := moveToHistory(ctx, tx, id, readpast.StateCancelled, nil, nowUS)
	if err != nil {
		return wakeup{}, err
	}
	switch {
	case !group.Valid || readpast.JobState(state) == readpast.StateBlocked:
		return wakeup{now: parent}, nil // a blocked job holds no slot and no mark
	case readpast.JobState(state) == readpast.StateRunning:
		keys := map[string]int{}
		if err := freeJobKeys(keys, group, more); err != nil {
			return wakeup{}, fmt.Errorf("job %d: %w", id, err)
		}
		wake, err := freeSlots(ctx, tx, keys, nowUS)
		wake.now = wake.now || parent
		return wake, err
	}
	// A pending job left its group's stream: the only mark leading to the
	// group may have been its own, in a queue no claimer reads (paused).
	wake, err = announceHeads(ctx, tx, []string{group.String}, nil, nowUS)
	wake.now = wake.now || parent
	return wake, err
}

// historyErr is ErrInvalidState when job id is finished, else ErrNotFound.
func historyErr(ctx context.Context, tx *sql.Tx, id int64) error {
	var state string
	err := tx.QueryRowContext(ctx, historyStateSQL, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return readpast.ErrNotFound
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
}

// Retry makes a job pending now: a failed or cancelled job comes back from
// history (same id, attempt 0, errors kept); a pending job's run_at becomes
// now. readpast.ErrInvalidState for running and succeeded jobs.
func (s *Store) Retry(ctx context.Context, id int64) (*readpast.Job, error) {
	var job *readpast.Job
	err := s.writeTx(ctx, "retry", func(tx *sql.Tx) error {
		if err := retryIn(ctx, tx, id, micros(s.now())); err != nil {
			return err
		}
		var err error
		job, err = scanJob(tx.QueryRowContext(ctx, getLiveSQL, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wake()
	return job, nil
}

// retryIn makes job id pending now inside tx (see Retry).
func retryIn(ctx context.Context, tx *sql.Tx, id int64, nowUS int64) error {
	var (
		state string
		group sql.NullString
	)
	err := tx.QueryRowContext(ctx, liveStateSQL, id).Scan(&state, &group)
	switch {
	case err == nil && readpast.JobState(state) == readpast.StatePending:
		if _, err := tx.ExecContext(ctx, runNowSQL, id, nowUS); err != nil {
			return err
		}
	case err == nil:
		return fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
	case errors.Is(err, sql.ErrNoRows):
		if err := tx.QueryRowContext(ctx, historyStateSQL, id).Scan(&state); errors.Is(err, sql.ErrNoRows) {
			return readpast.ErrNotFound
		} else if err != nil {
			return err
		}
		if s := readpast.JobState(state); s != readpast.StateFailed && s != readpast.StateCancelled {
			return fmt.Errorf("job %d is %s: %w", id, state, readpast.ErrInvalidState)
		}
		if err := retakeKey(ctx, tx, id, nowUS); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, restoreSQL, id, nowUS); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, deleteHistorySQL, id); err != nil {
			return err
		}
	default:
		return err
	}
	return markJobs(ctx, tx, []int64{id})
}
