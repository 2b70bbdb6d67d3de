package readpast

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// HandlerFunc runs one job. It returns the job's result (marshalled to
// JSON; nil for none) or an error, which fails the attempt. Its ctx is
// cancelled when the claim's lease is lost (context.Cause is ErrLeaseLost),
// when the attempt's timeout passes (ErrHandlerTimeout) or when the client
// stops past its deadline (ErrShutdown).
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// HandlerOptions tune one kind's handling. Zero fields take the client's.
type HandlerOptions struct {
	// RetryPolicy decides the wait before the next attempt.
	RetryPolicy RetryPolicy
	// Timeout bounds one attempt of this kind: the handler's ctx ends
	// after it (context.Cause is ErrHandlerTimeout) and, unless the
	// handler still succeeds, the attempt fails with a *TimeoutError.
	// Zero takes Config.JobTimeout; negative means none.
	Timeout time.Duration
	// JobTimeout, when set, decides one job's timeout, say from its
	// payload: a positive answer bounds the attempt, negative means none,
	// and zero falls back to Timeout.
	JobTimeout func(job *Job) time.Duration
}

// timeout returns how long the attempt of job may run, given the client's
// default; 0 means no bound.
func (h handler) timeout(job *Job, clientDefault time.Duration) time.Duration {
	d := time.Duration(0)
	if h.opts.JobTimeout != nil {
		d = h.opts.JobTimeout(job)
	}
	d = cmp.Or(d, h.opts.Timeout, clientDefault)
	return max(d, 0)
}

type handler struct {
	fn   HandlerFunc
	opts HandlerOptions
}

// Workers maps job kinds to handlers. Register every kind before
// starting a Client; a Workers is not safe for registration once in use.
type Workers struct {
	handlers map[string]handler
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{handlers: map[string]handler{}} }

// Handle registers fn for kind. opts may be nil. It panics when kind is
// registered twice or is not a valid name, as a programming error.
func (w *Workers) Handle(kind string, fn HandlerFunc, opts *HandlerOptions) {
	if err := checkName("kind", kind, true); err != nil {
		panic(fmt.Sprintf("readpast: Handle: %v", err))
	}
	if _, dup := w.handlers[kind]; dup {
		panic(fmt.Sprintf("readpast: Handle: kind %q registered twice", kind))
	}
	h := handler{fn: fn}
	if opts != nil {
		h.opts = *opts
	}
	w.handlers[kind] = h
}

// HandleTyped registers a handler whose payload is decoded into T. A
// payload that does not decode fails the job for good: retrying cannot fix
// it.
func HandleTyped[T any](w *Workers, kind string, fn func(ctx context.Context, job *Job, args T) (any, error), opts *HandlerOptions) {
	w.Handle(kind, func(ctx context.Context, job *Job) (any, error) {
		var args T
		if err := json.Unmarshal(job.Payload, &args); err != nil {
			return nil, Permanent(fmt.Errorf("decode %s payload: %w", kind, err))
		}
		return fn(ctx, job, args)
	}, opts)
}

// Sentinel causes of a handler's cancelled context.
var (
	// ErrLeaseLost: the claim ended while the handler ran (its lease
	// expired and the job was rescued, or it was cancelled). The handler's
	// outcome will be refused.
	ErrLeaseLost = errors.New("readpast: lease lost")
	// ErrShutdown: the client stopped before the handler finished; the job
	// is released for another worker.
	ErrShutdown = errors.New("readpast: client shutting down")
	// ErrHandlerTimeout: the attempt ran past its timeout
	// (HandlerOptions.Timeout, JobTimeout or Config.JobTimeout). Unlike a
	// lost lease, the claim is still good and the failure is recorded.
	ErrHandlerTimeout = errors.New("readpast: handler timed out")
)

// TimeoutError is the error recorded for an attempt whose handler returned
// an error after its timeout ended its ctx. It matches ErrHandlerTimeout.
type TimeoutError struct {
	// Timeout is the bound the attempt ran past.
	Timeout time.Duration
	// Err is what the handler returned.
	Err error
}

// Error says that the handler timed out, after how long, and what it
// returned.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%v after %s (the handler returned: %v)", ErrHandlerTimeout, e.Timeout, e.Err)
}

// Unwrap returns the handler's error and ErrHandlerTimeout.
func (e *TimeoutError) Unwrap() []error { return []error{ErrHandlerTimeout, e.Err} }

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the job fails for good instead of being retried.
func Permanent(err error) error { return &permanentError{err: err} }

// SnoozeError is what Snooze returns: a handler that returns it (or an
// error wrapping it) puts its job back to pending Delay from now, without
// counting the attempt (Store.Snooze). Past Config.MaxSnoozes snoozes of
// one job the attempt fails instead.
type SnoozeError struct {
	// Delay is how long the job sleeps: 0 to MaxSnooze.
	Delay time.Duration
}

// Error says how long the job is snoozed for.
func (e *SnoozeError) Error() string { return fmt.Sprintf("readpast: snoozed for %s", e.Delay) }

// Snooze returns the error a handler returns to snooze its job for d: the
// job is pending again at now+d, its attempt not counted and its Snoozes
// one higher.
//
//	if !ready(job) {
//		return nil, readpast.Snooze(time.Minute)
//	}
func Snooze(d time.Duration) error { return &SnoozeError{Delay: d} }

// PanicError is the error of an attempt whose handler panicked.
type PanicError struct {
	Value any
	Stack string
}

// Error gives the panic's value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
