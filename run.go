package readpast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// execute runs one claimed job, claimed at claimed, on worker w, and
// records its outcome. It is the path of every job, kept lean: the run's
// state is one allocation (run), and what follows a failure is a method
// of its own (failed), which keeps execute's frame small (496 bytes
// instead of 1,072).
func (p *producer) execute(w *worker, job *Job, claimed time.Time) {
	c := p.client
	r := &run{p: p, job: job}
	if t := c.trace; t != nil {
		r.startProcess(t, p.spans)
		defer r.endProcess(t, w)
	}
	h, ok := c.cfg.Workers.handlers[job.Kind]
	if !ok {
		msg := fmt.Sprintf("no handler registered for kind %q", job.Kind)
		r.setOutcome(attemptOutcome(job, false), errors.New(msg))
		p.writeFailure(Failure{ID: job.ID, Token: job.Token, Message: msg, RetryAt: retryAt(job, claimed, c.cfg.RetryPolicy)}, r.log())
		return
	}
	ctx, cancel := w.jobContext()
	defer w.release()
	if r.traced != nil && r.traced.span != nil {
		ctx = trace.ContextWithSpan(ctx, r.traced.span)
	}
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
	job.flows = c.flows
	result, err := call(ctx, h.fn, job)

	cause := context.Cause(ctx)
	if errors.Is(cause, ErrLeaseLost) {
		r.setOutcome(outcomeLeaseLost, nil)
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
			r.setOutcome(outcomeSucceeded, nil)
			handedOver = c.done.add(Completion{ID: job.ID, Token: job.Token, Result: raw}, r.stop)
			if !handedOver {
				r.log().Warn("client stopped before the completion was written; the lease will expire")
			}
			return
		}
		err = Permanent(merr)
	} else if errors.Is(cause, ErrShutdown) {
		r.setOutcome(outcomeReleased, err)
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

	// traced is the attempt's span and measurement; nil when the client
	// has no Tracing, so that an untraced job's run is no larger.
	traced *attemptTrace

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
			r.setOutcome(outcomeSnoozed, nil)
			if r.traced != nil {
				r.traced.snooze = snooze.Delay
			}
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
	retry := time.Time{}
	var perm *permanentError
	discard := errors.As(err, &perm)
	if !discard {
		policy := c.cfg.RetryPolicy
		if h.opts.RetryPolicy != nil {
			policy = h.opts.RetryPolicy
		}
		retry = retryAt(job, claimed, policy)
	}
	r.setOutcome(attemptOutcome(job, discard), err)
	p.writeFailure(Failure{ID: job.ID, Token: job.Token, Message: err.Error(), Stack: stack, RetryAt: retry, Discard: discard}, r.log())
}

// retryAt is when job, claimed at claimed, runs again by policy. A
// negative wait, such as an exponential backoff that overflowed, is taken
// as none: added as it is, it could put the retry before 1970, which the
// store refuses, and the attempt's error would be lost.
func retryAt(job *Job, claimed time.Time, policy RetryPolicy) time.Time {
	return dbNow(job, claimed).Add(max(policy(job.Attempt), 0))
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
