package readpast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// producer claims jobs of one queue and runs each in its own goroutine,
// never more than cfg.MaxWorkers at once.
type producer struct {
	client  *Client
	queue   string
	cfg     QueueConfig
	wake    <-chan struct{}
	workCtx context.Context // cancelled (cause ErrShutdown) when Stop gives up waiting

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

// execute runs one claimed job, claimed at claimed, on worker w, and
// records its outcome. It is the path of every job, kept lean: the run's
// state is one allocation (run), and what follows a failure is a method
// of its own (failed), which keeps execute's frame small (496 bytes
// instead of 1,072).
func (p *producer) execute(w *worker, job *Job, claimed time.Time) {
	c := p.client
	r := &run{p: p, job: job}
	h, ok := c.cfg.Workers.handlers[job.Kind]
	if !ok {
		msg := fmt.Sprintf("no handler registered for kind %q", job.Kind)
		p.writeFailure(Failure{ID: job.ID, Token: job.Token, Message: msg, RetryAt: dbNow(job, claimed).Add(c.cfg.RetryPolicy(job.Attempt))}, r.log())
		return
	}
	ctx, cancel := w.jobContext()
	defer w.release()
	timeout := h.timeout(job, c.cfg.JobTimeout)
	if timeout > 0 {
		var stopTimeout context.CancelFunc
		ctx, stopTimeout = context.WithTimeoutCause(ctx, timeout, ErrHandlerTimeout)
		defer stopTimeout()
	}
	// The lease is kept alive until the outcome is written, not only while
	// the handler runs: a completion may wait in the completer's queue, so
	// on success the completer stops the heartbeat once it has written it.
	r.beat(cancel)
	handedOver := false
	defer func() {
		if !handedOver {
			r.stop()
		}
	}()
	result, err := call(ctx, h.fn, job)

	cause := context.Cause(ctx)
	if errors.Is(cause, ErrLeaseLost) {
		r.log().Warn("lease lost while running; outcome discarded")
		return
	}
	if err == nil {
		// Even after a shutdown cancel: the work is done, record it.
		raw, merr := marshalResult(result)
		if merr == nil {
			merr = CheckResult(raw)
		}
		if merr == nil {
			handedOver = c.done.add(Completion{ID: job.ID, Token: job.Token, Result: raw}, r.stop)
			if !handedOver {
				r.log().Warn("client stopped before the completion was written; the lease will expire")
			}
			return
		}
		err = Permanent(merr)
	} else if errors.Is(cause, ErrShutdown) {
		r.releaseJob()
		return
	}
	r.failed(h, claimed, err, cause, timeout)
}

// releaseJob gives the job back for another worker: the client stopped
// while its handler ran, and the handler returned an error.
func (r *run) releaseJob() {
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	if err := r.p.client.store.Release(ctx, r.job.ID, r.job.Token); err != nil && !errors.Is(err, ErrStaleToken) {
		r.log().Warn("release on shutdown", slog.Any("error", err))
	}
}

// run is the state of one job's execution: its logger, made on first use
// (most jobs log nothing, and With formats its attributes at once: 6% of
// the client CPU profile of a 100-worker drain), and its heartbeat.
type run struct {
	p       *producer
	job     *Job
	logOnce sync.Once
	logger  *slog.Logger

	mu      sync.Mutex
	stopped bool        // protected by mu
	timer   *time.Timer // protected by mu
	due     time.Time   // protected by mu
	// cancel ends the handler's context (ErrLeaseLost). beat sets it
	// before it starts the timer, and it does not change after.
	cancel context.CancelCauseFunc
}

// log returns the job's logger.
func (r *run) log() *slog.Logger {
	r.logOnce.Do(func() {
		r.logger = r.p.client.log.With(slog.Int64("job_id", r.job.ID), slog.String("kind", r.job.Kind), slog.Int("attempt", r.job.Attempt))
	})
	return r.logger
}

// failed records the outcome of an attempt that did not succeed (err,
// with the handler's context ended by cause, after timeout if set):
// snoozed, or failed and retried by the policy.
func (r *run) failed(h handler, claimed time.Time, err, cause error, timeout time.Duration) {
	p, c, job := r.p, r.p.client, r.job
	var snooze *SnoozeError
	if errors.As(err, &snooze) && !errors.Is(cause, ErrHandlerTimeout) {
		switch bad := CheckSnooze(snooze.Delay); {
		case bad != nil:
			err = fmt.Errorf("%w (the handler returned: %w)", bad, err)
		case job.Snoozes < c.cfg.MaxSnoozes:
			p.writeSnooze(job, snooze.Delay, r.log())
			return
		default:
			err = fmt.Errorf("job snoozed %d times, the limit (Config.MaxSnoozes), and asked to snooze again: %w", job.Snoozes, err)
		}
	}
	if errors.Is(cause, ErrHandlerTimeout) {
		err = &TimeoutError{Timeout: timeout, Err: err}
	}
	var stack string
	var pe *PanicError
	if errors.As(err, &pe) {
		stack = pe.Stack
	}
	retryAt := time.Time{}
	var perm *permanentError
	discard := errors.As(err, &perm)
	if !discard {
		policy := c.cfg.RetryPolicy
		if h.opts.RetryPolicy != nil {
			policy = h.opts.RetryPolicy
		}
		retryAt = dbNow(job, claimed).Add(policy(job.Attempt))
	}
	p.writeFailure(Failure{ID: job.ID, Token: job.Token, Message: err.Error(), Stack: stack, RetryAt: retryAt, Discard: discard}, r.log())
}

// writeFailure records a failed attempt, retrying store errors for as
// long as one lease (the caller keeps the lease alive meanwhile), as the
// completer does for completions: a failure written during a short outage
// still counts, and the job is retried by its policy rather than after
// its lease runs out. Past that, the lease expires and the job is rescued.
func (p *producer) writeFailure(f Failure, log *slog.Logger) {
	log.Info("attempt failed", slog.String("error", f.Message))
	deadline := time.Now().Add(p.client.cfg.Lease)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		errs, err := p.client.store.Fail(ctx, []Failure{f})
		cancel()
		if err == nil {
			if errs[0] != nil {
				log.Warn("failure not recorded", slog.Any("error", errs[0]))
			}
			return
		}
		if time.Now().Add(backoff).After(deadline) {
			log.Error("record failure; the lease will expire instead", slog.Int("attempts", attempt), slog.Any("error", err))
			return
		}
		log.Warn("record failure", slog.Any("error", err))
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// writeSnooze snoozes a job, retrying store errors for a while; if it
// never lands, the lease expires and the job is rescued.
func (p *producer) writeSnooze(job *Job, d time.Duration, log *slog.Logger) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
		err := p.client.store.Snooze(ctx, job.ID, job.Token, d)
		cancel()
		switch {
		case err == nil:
			log.Info("job snoozed", slog.Duration("for", d), slog.Int("snoozes", job.Snoozes+1))
			return
		case errors.Is(err, ErrStaleToken) || errors.Is(err, ErrNotFound):
			log.Warn("snooze not recorded", slog.Any("error", err))
			return
		case attempt == 5:
			log.Error("snooze; the lease will expire instead", slog.Any("error", err))
			return
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// call runs fn, turning a panic into a *PanicError with the stack.
func call(ctx context.Context, fn HandlerFunc, job *Job) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return fn(ctx, job)
}

func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, errors.New("handler result is not valid JSON")
		}
		return r, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal handler result: %w", err)
	}
	return b, nil
}

// beat starts the heartbeat: it extends the job's lease every Lease/3
// until stopped, which happens once the job's outcome is written (or
// given up on), whether or not the handler is still running. When the
// claim is gone it cancels the handler with ErrLeaseLost and stops.
//
// A timer rather than a goroutine with a ticker: most jobs end before
// their first extension, and a goroutine and a ticker per job were 11% of
// the client's CPU in a 100-worker drain. The extensions keep a ticker's
// schedule, every period from the claim, so a slow one does not push the
// next back.
func (r *run) beat(cancel context.CancelCauseFunc) {
	period := r.p.client.cfg.Lease / 3
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancel = cancel
	r.due = time.Now().Add(period)
	r.timer = time.AfterFunc(period, r.extend)
}

// extend is one beat of the heartbeat.
func (r *run) extend() {
	lease := r.p.client.cfg.Lease
	period := lease / 3
	ectx, cancelExtend := context.WithTimeout(context.Background(), period)
	_, err := r.p.client.store.Extend(ectx, r.job.ID, r.job.Token, lease)
	cancelExtend()
	if errors.Is(err, ErrStaleToken) || errors.Is(err, ErrNotFound) {
		r.cancel(ErrLeaseLost)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if err != nil {
		r.log().Warn("extend lease", slog.Any("error", err))
	}
	// Like a ticker, skip what a slow extension missed.
	r.due = r.due.Add(period)
	if now := time.Now(); r.due.Before(now) {
		r.due = now
	}
	r.timer.Reset(time.Until(r.due))
}

// stop ends the heartbeat. It may be called more than once and does not
// wait: the completer stops thousands at a time, and an extension that
// races a written outcome is refused as stale, harmlessly.
func (r *run) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	r.timer.Stop()
}
