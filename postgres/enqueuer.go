package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
)

// Enqueue coalescing. Each enqueue statement is a transaction of its own,
// and its cost is mostly per statement and per commit, not per job: eight
// producers that each enqueue one job at a time spent 115 µs of server time
// per job in the statement alone, and each waited for its own commit's
// flush. Store.Enqueue therefore does for enqueues what PostgreSQL's group
// commit does for flushes: while enqueueWriters statements are running,
// calls that come meanwhile wait, and the next statement carries all of
// them at once. A call that finds a writer free goes at once, alone, so
// coalescing adds no wait to an enqueue that has no company.
const (
	// enqueueWriters is how many enqueue statements of one store may run
	// at once before calls queue up to share the next.
	enqueueWriters = 2
	// maxCoalescedJobs and maxCoalescedBytes (of payloads) bound what one
	// shared statement carries; a single call larger than that still goes
	// whole, alone.
	maxCoalescedJobs  = 1000
	maxCoalescedBytes = 8 << 20
)

// enqueuer coalesces concurrent Store.Enqueue calls without unique keys.
// A shared statement is still one statement: its calls' jobs commit
// together or not at all, each call's with ascending ids in its order.
// When it fails on something a job caused (an error from the server that
// is not about the server's availability), nothing committed, and each
// call is written again alone, so that one call's bad job fails that call
// only.
type enqueuer struct {
	// write runs one statement; it is Store.insert.
	write func(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error)

	mu      sync.Mutex
	writing int            // statements running or about to
	waiting []*enqueueCall // calls that wait for the next statement
}

// enqueueCall is one Store.Enqueue call going through the enqueuer.
type enqueueCall struct {
	ctx  context.Context
	cols *enqueueCols
	out  []*readpast.Job
	err  error
	done chan struct{} // closed once out and err are set
}

// enqueue writes cols, alone at once when a writer is free, else in the
// next shared statement. A call whose context ends while it waits is
// taken out and returns the context's error, having written nothing. Once
// its jobs are in a statement, it waits for that statement's outcome
// rather than report an error for jobs that may commit. A shared
// statement is cancelled only when every call in it has ended, and has
// the latest of their deadlines when every one has a deadline.
func (e *enqueuer) enqueue(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
	c := &enqueueCall{ctx: ctx, cols: cols, done: make(chan struct{})}
	e.mu.Lock()
	if e.writing < enqueueWriters {
		// Nothing waits while a writer is free: waiting calls are taken
		// by a writer before it counts itself out.
		e.writing++
		e.mu.Unlock()
		e.lead(c)
		return c.out, c.err
	}
	e.waiting = append(e.waiting, c)
	e.mu.Unlock()
	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
	}
	e.mu.Lock()
	if i := slices.Index(e.waiting, c); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
		e.mu.Unlock()
		return nil, opErr("enqueue", ctx.Err())
	}
	e.mu.Unlock()
	<-c.done
	return c.out, c.err
}

// lead writes c alone as a writer of its own, then leaves the calls that
// came meanwhile to a drain on a goroutine of its own, or counts itself
// out when none came (even if the write panics).
func (e *enqueuer) lead(c *enqueueCall) {
	defer func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.waiting) == 0 {
			e.writing--
			return
		}
		go e.drain()
	}()
	e.run([]*enqueueCall{c})
}

// drain writes the waiting calls, a shared statement at a time, until
// none wait.
func (e *enqueuer) drain() {
	for {
		e.mu.Lock()
		if len(e.waiting) == 0 {
			e.writing--
			e.mu.Unlock()
			return
		}
		n, jobs, size := 0, 0, 0
		for ; n < len(e.waiting); n++ {
			cols := e.waiting[n].cols
			if n > 0 && (jobs+cols.jobs() > maxCoalescedJobs || size+cols.payloadBytes > maxCoalescedBytes) {
				break
			}
			jobs, size = jobs+cols.jobs(), size+cols.payloadBytes
		}
		calls := slices.Clone(e.waiting[:n])
		e.waiting = slices.Delete(e.waiting, 0, n)
		e.mu.Unlock()
		e.run(calls)
	}
}

// run writes calls in one statement and gives each its outcome.
func (e *enqueuer) run(calls []*enqueueCall) {
	if len(calls) == 1 {
		c := calls[0]
		c.out, c.err = e.write(c.ctx, c.cols)
		close(c.done)
		return
	}
	ctx, cancel := allEnded(calls)
	defer cancel()
	all := &enqueueCols{}
	for _, c := range calls {
		all.add(c.cols)
	}
	out, err := e.write(ctx, all)
	if err != nil && ctx.Err() != nil {
		// The shared context ended: every call's has ended too, or ends
		// in a moment (the shared deadline is the latest of theirs, and
		// each context's timer fires on its own). Each caller's context
		// is done before it hears of the failure, as with a statement
		// run on that context.
		for _, c := range calls {
			<-c.ctx.Done()
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Severity == "ERROR" && !unavailableSQLState(pgErr.Code) {
		// The statement failed and changed nothing (an ERROR, not a
		// FATAL that may come after a commit): one call at a time.
		for _, c := range calls {
			c.out, c.err = e.write(c.ctx, c.cols)
			close(c.done)
		}
		return
	}
	if err == nil && len(out) != all.jobs() {
		err = opErr("enqueue", errors.New("a shared enqueue statement returned a row count other than the jobs it was given"))
	}
	for _, c := range calls {
		// Rows come back in input order: each call's are the next of them.
		if err == nil {
			n := c.cols.jobs()
			c.out, out = out[:n:n], out[n:]
		} else {
			c.err = err
		}
		close(c.done)
	}
}

// allEnded returns a context that is cancelled once every call's context
// has ended, with the latest of their deadlines if each has one. It
// carries the first call's values (a tracer sees the shared statement
// there).
func allEnded(calls []*enqueueCall) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(calls[0].ctx)
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if latest.IsZero() {
		ctx, cancel = context.WithCancel(base)
	} else {
		ctx, cancel = context.WithDeadline(base, latest)
	}
	var left atomic.Int64
	left.Store(int64(len(calls)))
	stops := make([]func() bool, len(calls))
	for i, c := range calls {
		stops[i] = context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
