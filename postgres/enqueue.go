package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// enqueueCols holds jobs validated and laid out as the parallel arrays of
// sql/enqueue.sql and sql/enqueue_unique.sql. A zero RunAt goes as NULL:
// now on the database's clock.
type enqueueCols struct {
	queues, kinds, payloads []string
	prios, maxAtt           []int32
	runAt                   []*time.Time
	groups, keys            []*string
	uniqueFor               []*int64
	tags                    []*string
	// traceparents and tracestates are the jobs' creation contexts; both
	// nil when no job has one, so that an untraced enqueue sends NULL
	// arrays (unnest pads them with NULLs) and allocates nothing for them.
	traceparents, tracestates []*string
	// moreKeys are the jobs' keys after the first (EnqueueParams.Keys[1:])
	// joined by spaces, which no key holds; nil when no job has more than
	// one key, so that such an enqueue sends a NULL array.
	moreKeys     []*string
	payloadBytes int // the payloads' total size
}

// newEnqueueCols validates jobs and lays them out. index maps the position
// of a job to the one errors name (nil: the same).
func newEnqueueCols(jobs []readpast.EnqueueParams, index []int) (*enqueueCols, error) {
	now := time.Now()
	n := len(jobs)
	c := &enqueueCols{
		queues: make([]string, n), kinds: make([]string, n), payloads: make([]string, n),
		prios: make([]int32, n), maxAtt: make([]int32, n), runAt: make([]*time.Time, n),
		groups: make([]*string, n), keys: make([]*string, n), uniqueFor: make([]*int64, n), tags: make([]*string, n),
	}
	for i, p := range jobs {
		runNow := p.RunAt.IsZero()
		p, err := p.Normalize(now)
		if err != nil {
			pos := i
			if index != nil {
				pos = index[i]
			}
			return nil, fmt.Errorf("job %d: %w", pos, err)
		}
		c.queues[i], c.kinds[i], c.payloads[i] = p.Queue, p.Kind, string(p.Payload)
		c.payloadBytes += len(p.Payload)
		c.prios[i], c.maxAtt[i] = int32(p.Priority), int32(p.MaxAttempts)
		if !runNow {
			c.runAt[i] = &p.RunAt
		}
		if p.Group != "" {
			c.groups[i] = &p.Group
		}
		if len(p.Keys) > 1 {
			if c.moreKeys == nil {
				c.moreKeys = make([]*string, n)
			}
			k := strings.Join(p.Keys[1:], " ")
			c.moreKeys[i] = &k
		}
		if p.UniqueKey != "" {
			c.keys[i] = &p.UniqueKey
		}
		if p.UniqueFor > 0 {
			us := p.UniqueFor.Microseconds()
			c.uniqueFor[i] = &us
		}
		if len(p.Tags) > 0 {
			// Tags never contain a space (Normalize checks).
			t := strings.Join(p.Tags, " ")
			c.tags[i] = &t
		}
		if p.Traceparent != "" {
			if c.traceparents == nil {
				c.traceparents, c.tracestates = make([]*string, n), make([]*string, n)
			}
			c.traceparents[i] = &p.Traceparent
			if p.Tracestate != "" {
				c.tracestates[i] = &p.Tracestate
			}
		}
	}
	return c, nil
}

// traced reports whether a job of c has a creation context.
func (c *enqueueCols) traced() bool { return c.traceparents != nil }

// traceContext returns the creation context of c's job i.
func (c *enqueueCols) traceContext(i int) (traceparent, tracestate string) {
	if c.traceparents == nil {
		return "", ""
	}
	if p := c.traceparents[i]; p != nil {
		traceparent = *p
	}
	if s := c.tracestates[i]; s != nil {
		tracestate = *s
	}
	return traceparent, tracestate
}

// setTraceContexts sets on jobs, the jobs of c in order, their creation
// contexts.
func (c *enqueueCols) setTraceContexts(jobs []*readpast.Job) {
	if !c.traced() {
		return
	}
	for i, j := range jobs {
		if i < c.jobs() && j != nil {
			j.Traceparent, j.Tracestate = c.traceContext(i)
		}
	}
}

// jobs is how many jobs c holds.
func (c *enqueueCols) jobs() int { return len(c.queues) }

// add puts o's jobs after c's.
func (c *enqueueCols) add(o *enqueueCols) {
	n := c.jobs()
	c.payloadBytes += o.payloadBytes
	c.queues, c.kinds, c.payloads = append(c.queues, o.queues...), append(c.kinds, o.kinds...), append(c.payloads, o.payloads...)
	c.prios, c.maxAtt, c.runAt = append(c.prios, o.prios...), append(c.maxAtt, o.maxAtt...), append(c.runAt, o.runAt...)
	c.groups, c.keys = append(c.groups, o.groups...), append(c.keys, o.keys...)
	c.uniqueFor, c.tags = append(c.uniqueFor, o.uniqueFor...), append(c.tags, o.tags...)
	if c.traced() || o.traced() {
		c.traceparents = append(padded(c.traceparents, n), padded(o.traceparents, o.jobs())...)
		c.tracestates = append(padded(c.tracestates, n), padded(o.tracestates, o.jobs())...)
	}
	if c.moreKeys != nil || o.moreKeys != nil {
		c.moreKeys = append(padded(c.moreKeys, n), padded(o.moreKeys, o.jobs())...)
	}
}

// padded returns col, or n NULLs when col is nil.
func padded(col []*string, n int) []*string {
	if col == nil {
		return make([]*string, n)
	}
	return col
}

// keyedArgs are the parameters of sql/enqueue_unique.sql.
func (c *enqueueCols) keyedArgs() []any {
	return []any{c.queues, c.kinds, c.payloads, c.prios, c.runAt, c.maxAtt, c.groups, c.keys, c.uniqueFor, c.tags,
		c.traceparents, c.tracestates, c.moreKeys}
}

// insertArgs are the parameters of sql/enqueue.sql; notify is the
// payload of its NOTIFY, nil for none.
func (c *enqueueCols) insertArgs(notify *string) []any {
	return []any{c.queues, c.kinds, c.payloads, c.prios, c.runAt, c.maxAtt, c.groups, c.tags, notify,
		c.traceparents, c.tracestates, c.moreKeys}
}

// enqueue runs sql/enqueue.sql (or the keyed enqueue) on q. notify is the
// payload of the wake-up NOTIFY the statement sends itself, nil for none
// (see notifier and echoes); keyed enqueues always send one that every
// listener acts on.
func enqueue(ctx context.Context, q querier, jobs []readpast.EnqueueParams, notify *string) ([]*readpast.Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if anyKey(jobs) {
		return enqueueKeyedOp(ctx, pgxSource{q}, jobs)
	}
	cols, err := newEnqueueCols(jobs, nil)
	if err != nil {
		return nil, err
	}
	if tx, ok := q.(pgx.Tx); ok && cols.copies() {
		out, err := copyJobs(ctx, tx, cols, notify)
		if err != nil {
			return nil, opErr("enqueue", err)
		}
		return out, nil
	}
	return insertJobs(ctx, q, cols, notify)
}

// insertJobs runs sql/enqueue.sql on q for jobs without unique keys, laid
// out; notify as for enqueue.
func insertJobs(ctx context.Context, q querier, cols *enqueueCols, notify *string) ([]*readpast.Job, error) {
	rows, err := q.Query(ctx, enqueueSQL, cols.insertArgs(notify)...)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	out, err := collectJobs(rows)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	cols.setTraceContexts(out) // rows come back in input order
	return out, nil
}

// insert writes jobs without unique keys in one statement of their own,
// which sends the wake-up NOTIFY or leaves it to the notifier's trailing
// one.
func (s *Store) insert(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
	if cols.copies() {
		return s.copyInsert(ctx, cols)
	}
	// Store.Enqueue wakes this store's claimers once the jobs committed.
	notify := s.notify.due()
	payload := s.ownWake(notify)
	out, err := insertJobs(ctx, s.pool, cols, payload)
	switch {
	case err != nil:
		s.enqueueFailed(payload, err)
	case !notify:
		s.notify.trail(true)
	}
	return out, err
}

// Enqueue inserts jobs in one statement: all or none. A batch with unique
// keys runs in a transaction of its own (see enqueueKeyed). Calls without
// keys that come while others are being written share the next statement
// (see enqueuer): a call's jobs still commit all or none, with ascending
// ids in its order, and a call with a bad job fails alone.
func (s *Store) Enqueue(ctx context.Context, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	var (
		out []*readpast.Job
		err error
	)
	switch {
	case oneKeyOnly(jobs):
		// One key and nothing else: a round that does not settle it
		// changed nothing, so no transaction is needed around the rounds.
		out, err = enqueue(ctx, s.pool, jobs, everyone())
	case anyKey(jobs):
		out, err = retryDeadlock(ctx, func() ([]*readpast.Job, error) {
			var out []*readpast.Job
			err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				out, err = enqueueKeyed(ctx, pgxSource{tx}, jobs)
				return err
			})
			return out, err
		})
		if err != nil && !errors.Is(err, readpast.ErrInvalid) {
			err = opErr("enqueue", err)
		}
	case len(jobs) == 0:
	default:
		// Concurrent calls share statements (see enqueuer).
		cols, verr := newEnqueueCols(jobs, nil)
		if verr != nil {
			return nil, verr
		}
		out, err = s.enq.enqueue(ctx, cols)
	}
	if err == nil && len(out) > 0 {
		s.claimFrom.enqueued(out)
		s.hub.Broadcast()
		s.dueLater(out, true)
	}
	return out, err
}

// EnqueueTx inserts jobs inside the caller's transaction: they exist if and
// only if tx commits. Workers are woken when it commits.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: EnqueueTx: nil transaction")
	}
	defer s.claimFrom.ahead() // its jobs' run_at is tx's start (claimfrom.go)
	// The NOTIFY is sent at tx's commit, which this store does not see:
	// its own listener wakes its claimers then.
	out, err := enqueue(ctx, tx, jobs, everyone())
	if err == nil {
		s.dueLater(out, true) // if tx commits; a spurious alarm costs a claim
	}
	return out, err
}
