package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// Large batches are written with COPY. A batch of jobs without unique
// keys or groups needs nothing of sql/enqueue.sql but the rows themselves,
// their count per queue and their tag rows; for such a batch of at least
// copyMinJobs jobs the enqueue streams the rows with COPY instead of
// passing them as arrays to one INSERT ... SELECT FROM unnest(...), which
// PostgreSQL then has to unpack, project and return. Three statements in
// one transaction:
//
//  1. sql/enqueue_ids.sql reserves the batch's ids, in ascending order,
//     and reads the transaction's now();
//  2. COPY readpast_jobs writes the rows with those ids, a run-at of that
//     now() for jobs due now (what the INSERT's coalesce(run_at, now())
//     gives), and created_at from the column's default, the same now();
//  3. sql/enqueue_copied.sql counts the new jobs per queue, writes the tag
//     rows and queues the wake-up NOTIFY.
//
// The batch commits all or none, with ascending ids in its order, as
// through sql/enqueue.sql, and like it, it only inserts: it never waits on
// a claim, a finisher or another enqueue. The jobs returned are built from
// what was written, not read back: a payload comes back as the caller gave
// it, where RETURNING gives PostgreSQL's jsonb rendering of it (the same
// JSON value; Get returns that rendering).
const copyMinJobs = 500

var (
	enqueueIDsSQL    = mustStatement("enqueue_ids")
	enqueueCopiedSQL = mustStatement("enqueue_copied")
)

// copyColumns are the columns COPY writes; the others take their defaults
// (a pending job, never attempted, created now). A batch in which a job
// has a creation context writes copyTracedColumns.
var (
	copyColumns       = []string{"id", "queue", "kind", "payload", "priority", "run_at", "max_attempts", "tags"}
	copyTracedColumns = append(slices.Clone(copyColumns), "traceparent", "tracestate")
)

// copies reports whether cols goes through COPY: large enough, and
// without a group (whose ready marks sql/enqueue.sql writes). Callers
// send batches with unique keys elsewhere.
func (c *enqueueCols) copies() bool {
	if c.jobs() < copyMinJobs {
		return false
	}
	for _, g := range c.groups {
		if g != nil {
			return false
		}
	}
	return true
}

// copyJobs writes cols in tx with COPY (see copyMinJobs); notify is the
// payload of the wake-up NOTIFY tx sends when it commits, nil for none. Its errors are the
// driver's, for the caller to wrap.
func copyJobs(ctx context.Context, tx pgx.Tx, cols *enqueueCols, notify *string) ([]*readpast.Job, error) {
	n := cols.jobs()
	var (
		now time.Time
		ids []int64
	)
	if err := tx.QueryRow(ctx, enqueueIDsSQL, n).Scan(&now, &ids); err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("reserved %d ids for %d jobs", len(ids), n)
	}
	slices.Sort(ids)
	now = now.UTC()
	jobs := make([]readpast.Job, n)
	out := make([]*readpast.Job, n)
	perQueue := map[string]int64{}
	var tagIDs []int64
	var tagLists []string
	for i := range n {
		j := &jobs[i]
		*j = readpast.Job{ID: ids[i], Queue: cols.queues[i], Kind: cols.kinds[i],
			Payload: []byte(cols.payloads[i]), Priority: int(cols.prios[i]), State: readpast.StatePending,
			MaxAttempts: int(cols.maxAtt[i]), RunAt: now, CreatedAt: now,
			Errors: []readpast.AttemptError{}, Tags: []string{}}
		if t := cols.runAt[i]; t != nil {
			j.RunAt = t.Truncate(time.Microsecond).UTC() // what timestamptz keeps
		}
		if t := cols.tags[i]; t != nil {
			j.Tags = strings.Split(*t, " ") // no tag holds a space
			tagIDs, tagLists = append(tagIDs, j.ID), append(tagLists, *t)
		}
		j.Traceparent, j.Tracestate = cols.traceContext(i)
		perQueue[j.Queue]++
		out[i] = j
	}
	columns := copyColumns
	if cols.traced() {
		columns = copyTracedColumns
	}
	src := &copySource{jobs: jobs, cols: cols, i: -1, row: make([]any, len(columns))}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"readpast_jobs"}, columns, src); err != nil {
		return nil, err
	}
	queues := make([]string, 0, len(perQueue))
	counts := make([]int64, 0, len(perQueue))
	for q, k := range perQueue {
		queues, counts = append(queues, q), append(counts, k)
	}
	if _, err := tx.Exec(ctx, enqueueCopiedSQL, queues, counts, tagIDs, tagLists, notify); err != nil {
		return nil, err
	}
	return out, nil
}

// copyInsert writes cols with COPY in a transaction of its own, which
// sends the wake-up NOTIFY or leaves it to the notifier's trailing one
// (as Store.insert does).
func (s *Store) copyInsert(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
	notify := s.notify.due()
	payload := s.ownWake(notify)
	var out []*readpast.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = copyJobs(ctx, tx, cols, payload)
		return err
	})
	if err != nil {
		s.enqueueFailed(payload, err) // the commit's answer may be what was lost
		return nil, opErr("enqueue", err)
	}
	if !notify {
		s.notify.trail(true)
	}
	return out, nil
}

// copySource streams the rows of copyColumns to COPY from the jobs being
// written, one row buffer for all (pgx encodes a row before it asks for
// the next).
type copySource struct {
	jobs []readpast.Job
	cols *enqueueCols
	i    int
	row  []any
}

func (c *copySource) Next() bool { c.i++; return c.i < len(c.jobs) }

func (c *copySource) Values() ([]any, error) {
	j, i := &c.jobs[c.i], c.i
	var tags []string
	if len(j.Tags) > 0 {
		tags = j.Tags
	}
	c.row[0], c.row[1], c.row[2], c.row[3] = j.ID, j.Queue, j.Kind, c.cols.payloads[i]
	c.row[4], c.row[5], c.row[6], c.row[7] = c.cols.prios[i], j.RunAt, c.cols.maxAtt[i], tags
	if len(c.row) > 8 {
		c.row[8], c.row[9] = c.cols.traceparents[i], c.cols.tracestates[i]
	}
	return c.row, nil
}

func (c *copySource) Err() error { return nil }
