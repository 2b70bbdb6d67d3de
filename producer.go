package readpast

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// producer claims jobs of one queue and runs each in its own goroutine,
// never more than cfg.MaxWorkers at once.
type producer struct {
	client  *Client
	queue   string
	cfg     QueueConfig
	wake    <-chan struct{}
	workCtx context.Context // cancelled (cause ErrShutdown) when Stop gives up waiting
	spans   *processSpans   // how its attempts' spans start; nil without a tracer

	running int // owned by the run goroutine
	// workers counts the worker goroutines started and not retired; owned
	// by the run goroutine. One whose handler ended it (runtime.Goexit)
	// stays counted: retireIdle then finds fewer idle than it reckons and
	// stops at the first send no worker takes.
	workers int
	work    chan task // jobs for idle workers; closed when run returns
	// ended counts the handlers that returned since the run goroutine
	// last looked, and finished (capacity 1) tells it to look: a wake-up
	// for a whole batch of returns, rather than a channel send and a
	// select round each.
	ended    atomic.Int64
	finished chan struct{}
}

// claimsInFlight is how many claims of one queue a producer keeps in
// flight at once. Most of a claim's time is its round trip and its
// commit's wait for the disk, during which the slots it will fill, and
// any that free up meanwhile, sit idle; a second claim for the slots
// freed meanwhile overlaps that wait. Claims of one process never wait on
// each other (SKIP LOCKED), so they take disjoint jobs.
const claimsInFlight = 2

// claimResult is what one claim returns to the producer's loop.
type claimResult struct {
	limit  int       // the slots the claim was allowed to fill
	jobs   []*Job    // what it took
	began  time.Time // when it was sent
	at     time.Time // when it returned
	err    error
	signal uint64 // the producer's count of wake-ups and polls when the claim began
}

func (p *producer) run(ctx context.Context) {
	c := p.client
	p.finished = make(chan struct{}, 1)
	p.work = make(chan task)
	defer close(p.work) // after the jobs of the claims in flight are started
	poll := time.NewTicker(c.cfg.PollInterval)
	defer poll.Stop()
	// Claim in batches: a slot freed while others are busy waits for
	// company, until half the pool (or FetchLimit) is free or the first of
	// them has waited the fetch cooldown, unless the pool ran dry. Under
	// load the batch fills first (half of a 100-worker pool frees in about
	// 2 ms of a 25k jobs/s drain), and claims of twice the size of a
	// quarter's made that drain 15-20% faster; with long jobs the cooldown
	// bounds how long a free slot stays empty while jobs wait.
	batch := max(1, min(p.cfg.MaxWorkers, p.cfg.FetchLimit)/2)
	var gather <-chan time.Time // set while free slots wait for company
	gathered := false           // they waited the cooldown
	results := make(chan claimResult, claimsInFlight)
	inFlight, reserved := 0, 0 // claims in flight, and the slots they may fill
	// A claim is never cancelled midway (see claim): on the way out, the
	// jobs of the claims still in flight are started like any others, and
	// Stop deals with them.
	defer func() {
		for ; inFlight > 0; inFlight-- {
			p.start(<-results)
		}
	}()
	more := true               // the last claim may have left jobs behind
	var signal uint64          // wake-ups and polls so far
	var retry <-chan time.Time // set while waiting to retry a failed claim
	var backoff claimBackoff
	var cool <-chan time.Time // set while the fetch cooldown runs
	for {
		free := p.cfg.MaxWorkers - p.running - reserved
		idle := p.running == 0 && reserved == 0
		if ctx.Err() == nil && more && retry == nil && cool == nil && inFlight < claimsInFlight && free > 0 && (free >= batch || idle || gathered) {
			limit, at := min(free, p.cfg.FetchLimit), signal
			inFlight++
			reserved += limit
			gather, gathered = nil, false
			go func() {
				r := p.claim(ctx, limit)
				r.signal = at
				results <- r
			}()
			continue
		}
		if more && free > 0 && gather == nil && !gathered {
			gather = time.After(max(c.cfg.FetchCooldown, 0))
		}
		select {
		case <-ctx.Done():
			return
		case r := <-results:
			inFlight--
			reserved -= r.limit
			switch {
			case r.err != nil && ctx.Err() == nil && retry == nil:
				wait := backoff.next()
				c.log.WarnContext(ctx, "claim failed", slog.String("queue", p.queue), slog.Any("error", r.err), slog.Duration("retry_in", wait))
				retry = time.After(wait)
			case r.err != nil:
				// Stopping, or the other claim in flight failed too and
				// its retry is set: one wait, one backoff step.
			default:
				backoff.reset()
				p.start(r)
				// A claim that came back short found nothing more in
				// its snapshot; a wake-up or a poll since it began may
				// announce jobs it could not see.
				more = len(r.jobs) == r.limit || r.signal != signal
				// A claim that came back short had the queue to itself:
				// the next one waits out the cooldown, so that jobs
				// arriving meanwhile go in one claim. One that came back
				// full (the other claim in flight) ends the cooldown:
				// there is a backlog.
				if wait := c.cfg.FetchCooldown - r.at.Sub(r.began); len(r.jobs) < r.limit && wait > 0 && cool == nil {
					cool = time.After(wait)
				} else if len(r.jobs) == r.limit {
					cool = nil
				}
			}
		// A wake-up (the store's listener is back, or jobs were enqueued
		// here) cuts a retry's wait short; so does a finished handler,
		// whose slot wants filling.
		case <-retry:
			retry, more = nil, true
		case <-cool:
			cool = nil
		case <-gather:
			gather, gathered = nil, true
		case <-p.wake:
			retry, more = nil, true
			signal++
		case <-poll.C:
			more = true
			signal++
			p.retireIdle()
		case <-p.finished:
			p.running -= int(p.ended.Swap(0))
			retry = nil
		}
	}
}

// Claim retries after a failure: the wait doubles from claimBackoffMin up
// to claimBackoffMax, and each wait is drawn at random from its upper half,
// so that workers which lost the database together come back spread out,
// and every one within about claimBackoffMax of its return.
const (
	claimBackoffMin = 50 * time.Millisecond
	claimBackoffMax = 800 * time.Millisecond
)

// claimBackoff is the state of a producer's claim retries.
type claimBackoff struct{ cur time.Duration }

// next returns how long to wait before the next attempt.
func (b *claimBackoff) next() time.Duration {
	b.cur = min(max(2*b.cur, claimBackoffMin), claimBackoffMax)
	return b.cur/2 + rand.N(b.cur/2+1)
}

// reset starts over after a claim that worked.
func (b *claimBackoff) reset() { b.cur = 0 }

// storeCallTimeout bounds each store call the worker pool makes on its own
// behalf (claims, outcomes, heartbeats, releases).
const storeCallTimeout = 10 * time.Second

// claim takes up to limit jobs of the queue. It runs on a goroutine of
// its own; the producer's loop starts the jobs (start).
func (p *producer) claim(ctx context.Context, limit int) claimResult {
	c := p.client
	// A claim is never cancelled midway: the database may commit it while
	// the driver reports the cancel, and the jobs would sit until their
	// leases expire. Stop waits for it to finish instead.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
	defer cancel()
	began := time.Now()
	jobs, err := c.store.Claim(claimCtx, ClaimParams{Queues: []string{p.queue}, Worker: c.cfg.WorkerID, Limit: limit, Lease: c.cfg.Lease})
	return claimResult{limit: limit, jobs: jobs, began: began, at: time.Now(), err: err}
}

// task is a claimed job handed to a worker goroutine.
type task struct {
	job *Job
	// claimed is when its claim was sent, on this process's clock: no
	// later than the database's time of the claim (the job's StartedAt),
	// so that dbNow never runs behind the database's clock and a retry
	// never comes early. Measured from when the claim returned instead,
	// the estimate ran behind by as long as the claim took (100-400 ms
	// under CI's load), and a retry with a 1 s policy ran after 0.9 s in
	// TestClockSkew.
	claimed time.Time
}

// start runs the jobs of a claim, each on a worker goroutine: one that is
// idle, or a new one. Workers stay for the next job rather than exit, so
// each keeps the stack it grew: with a goroutine a job, growing and
// copying stacks was 17% of the client's CPU per job
// (BenchmarkClientOverhead). There are never more workers than the most
// jobs that ran at once, at most MaxWorkers; idle ones are retired a half
// at a time, every poll interval (retireIdle), and all exit when the
// producer stops.
func (p *producer) start(r claimResult) {
	for _, j := range r.jobs {
		p.running++
		p.client.handlers.Add(1)
		p.client.jobs.Add(1)
		t := task{job: j, claimed: r.began}
		select {
		case p.work <- t:
		default:
			p.workers++
			go p.worker(t)
		}
	}
}

// retireIdle ends half of the idle workers (rounded up), so that a burst
// leaves no crowd of goroutines behind: one that is idle takes a task with
// no job and exits.
func (p *producer) retireIdle() {
	for n := (p.workers - p.running + 1) / 2; n > 0; n-- {
		select {
		case p.work <- task{}:
			p.workers--
		default:
			return // none idle after all: some are finishing a job
		}
	}
}

// worker runs t, then the jobs handed to it while idle, until it is
// retired or the producer stops.
func (p *producer) worker(t task) {
	w := &worker{base: context.WithoutCancel(p.workCtx)}
	defer context.AfterFunc(p.workCtx, func() { w.abort(context.Cause(p.workCtx)) })()
	for ok := true; ok && t.job != nil; t, ok = <-p.work {
		p.runTask(w, t)
	}
}

// worker cancels the context of the job it runs when workCtx ends. A
// job's context is not a child of workCtx: a child registers with its
// parent when made and unregisters when done, and with every job's
// context a child of workCtx, the workers contended for its lock and its
// map of children (making and ending the jobs' contexts fell from 17% to
// 8% of the client's CPU per job, BenchmarkClientOverhead). Each worker
// registers once instead.
type worker struct {
	base context.Context // workCtx's values, without its cancellation
	// attrs is where endProcess makes the attributes an attempt's span
	// ends with, reused from job to job (one allocation fewer a job).
	attrs []attribute.KeyValue

	mu      sync.Mutex
	cancel  context.CancelCauseFunc // the running job's; protected by mu
	aborted error                   // workCtx's cause, once it ended; protected by mu
}

// jobContext returns the context of the worker's next job, cancelled
// (with workCtx's cause) if workCtx has ended or ends, until release.
func (w *worker) jobContext() (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(w.base)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted != nil {
		cancel(w.aborted)
	}
	w.cancel = cancel
	return ctx, cancel
}

// release ends the job's context: the job is over.
func (w *worker) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel(nil)
	w.cancel = nil
}

// abort cancels the running job's context, and every later one's, with
// cause.
func (w *worker) abort(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.aborted = cause
	if w.cancel != nil {
		w.cancel(cause)
	}
}

// runTask runs one job and tells the producer that its slot is free,
// also if the handler ended its goroutine (runtime.Goexit).
func (p *producer) runTask(w *worker, t task) {
	defer func() {
		p.client.handlers.Add(-1)
		p.client.jobs.Done()
		p.ended.Add(1)
		select {
		case p.finished <- struct{}{}:
		default: // a wake-up is pending already
		}
	}()
	p.execute(w, t.job, t.claimed)
}

// dbNow estimates the database's clock from a job whose claim was sent at
// claimed (on this process's clock): StartedAt is the database's time of
// the claim, and the time since is measured on the monotonic clock. The
// estimate may run ahead of the database's clock, by the claim's way
// there, never behind it. Retry times are
// computed on it, so that a worker whose wall clock is off by minutes
// still retries when the policy says, neither at once nor minutes late.
func dbNow(job *Job, claimed time.Time) time.Time {
	if job.StartedAt == nil {
		return time.Now()
	}
	return job.StartedAt.Add(time.Since(claimed))
}
