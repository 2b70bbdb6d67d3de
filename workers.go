package readpast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// HandlerFunc runs one job. It returns the job's result (marshalled to
// JSON; nil for none) or an error, which fails the attempt. Its ctx is
// cancelled when the claim's lease is lost (context.Cause is ErrLeaseLost)
// or when the client stops past its deadline (ErrShutdown).
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// HandlerOptions tune one kind's handling. Zero fields take the client's.
type HandlerOptions struct {
	// RetryPolicy decides the wait before the next attempt.
	RetryPolicy RetryPolicy
	// Timeout bounds one attempt; the handler's ctx ends after it.
	Timeout time.Duration
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
)

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the job fails for good instead of being retried.
func Permanent(err error) error { return &permanentError{err: err} }

// PanicError is the error of an attempt whose handler panicked.
type PanicError struct {
	Value any
	Stack string
}

// Error gives the panic's value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
