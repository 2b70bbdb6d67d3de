package readpast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// completer writes successful outcomes in batches: each store.Complete
// carries every completion that queued up while the previous one ran, and
// those that arrive within the gathering window after the first.
// Each completion comes with a function that the completer calls once the
// completion is written or given up on: the worker pool keeps the job's
// lease alive until then.
type completer struct {
	store  Store
	log    *slog.Logger
	lease  time.Duration // how long a completion is retried
	window time.Duration // how long a batch gathers after its first; <= 0: none
	in     chan queued
	wg     sync.WaitGroup
	// quit ends when close gives up on the writes still pending: calls in
	// flight are cancelled and nothing is retried.
	quit   context.Context
	giveUp context.CancelFunc

	mu     sync.RWMutex // held for reading while sending on in
	closed bool         // protected by mu
}

// completerWriters is how many batches may be in flight at once.
const completerWriters = 2

// maxCompleteBatch bounds one Complete statement.
const maxCompleteBatch = 2000

// queued is a completion waiting to be written.
type queued struct {
	Completion
	settled func() // called once it is written or given up on
}

func newCompleter(store Store, log *slog.Logger, lease, window time.Duration) *completer {
	quit, giveUp := context.WithCancel(context.Background())
	return &completer{store: store, log: log, lease: lease, window: window, in: make(chan queued, 4*maxCompleteBatch),
		quit: quit, giveUp: giveUp}
}

func (c *completer) start() {
	for range completerWriters {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.run()
		}()
	}
}

// add queues a completion; it blocks while the queue is full. settled is
// called once it is written or given up on. After close (a handler that
// outlived Stop) the completion is dropped, add returns false and does not
// call settled, and the job's lease expires instead.
func (c *completer) add(comp Completion, settled func()) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.in <- queued{comp, settled}
	return true
}

// close writes what is queued and returns when it is written. When ctx
// ends first, the writes get grace more; then those still pending (the
// store unreachable, a write retrying) are given up: their jobs' leases
// expire and the jobs run again (at-least-once), and close returns an
// error wrapping ctx's.
func (c *completer) close(ctx context.Context, grace time.Duration) error {
	c.mu.Lock()
	c.closed = true
	close(c.in)
	c.mu.Unlock()
	defer c.giveUp()
	written := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(written)
	}()
	select {
	case <-written:
		return nil
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-written:
		return nil
	case <-t.C:
	}
	c.giveUp()
	<-written
	return fmt.Errorf("completions still unwritten %v after the stop deadline, given up (their leases will expire): %w", grace, ctx.Err())
}

func (c *completer) run() {
	waiting := make([]queued, 0, maxCompleteBatch)
	batch := make([]Completion, 0, maxCompleteBatch)
	var gather *time.Timer
	if c.window > 0 {
		gather = time.NewTimer(c.window)
		gather.Stop()
	}
	for first := range c.in {
		waiting = append(waiting[:0], first)
		var deadline <-chan time.Time // nil: take what is queued, do not wait
		if gather != nil {
			gather.Reset(c.window)
			deadline = gather.C
		}
	fill:
		for len(waiting) < maxCompleteBatch {
			select {
			case q, ok := <-c.in:
				if !ok {
					break fill
				}
				waiting = append(waiting, q)
				continue
			default:
			}
			if deadline == nil {
				break fill
			}
			select {
			case q, ok := <-c.in:
				if !ok {
					break fill
				}
				waiting = append(waiting, q)
			case <-deadline:
				break fill
			}
		}
		if gather != nil {
			gather.Stop()
		}
		batch = batch[:0]
		for _, q := range waiting {
			batch = append(batch, q.Completion)
		}
		c.write(batch)
		for _, q := range waiting {
			q.settled()
		}
	}
}

// write retries store errors, with the jobs' leases kept alive meanwhile,
// for as long as one lease lasts: past that, an outage has surely let the
// leases expire, and the jobs run again (at-least-once).
func (c *completer) write(batch []Completion) {
	deadline := time.Now().Add(c.lease)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(c.quit, storeCallTimeout)
		errs, err := c.store.Complete(ctx, batch)
		cancel()
		if err == nil {
			for i, e := range errs {
				switch {
				case e == nil:
				case errors.Is(e, ErrStaleToken):
					c.log.Warn("completion refused: claim no longer current", slog.Int64("job_id", batch[i].ID))
				case errors.Is(e, ErrInvalid):
					// The result cannot be stored: fail the job for good
					// rather than run it again.
					c.discard(batch[i], e)
				default:
					c.log.Warn("completion refused", slog.Int64("job_id", batch[i].ID), slog.Any("error", e))
				}
			}
			return
		}
		if c.quit.Err() != nil || time.Now().Add(backoff).After(deadline) {
			c.log.Error("write completions; leases will expire instead", slog.Int("jobs", len(batch)),
				slog.Int("attempts", attempt), slog.Bool("stopping", c.quit.Err() != nil), slog.Any("error", err))
			return
		}
		c.log.Warn("write completions", slog.Int("jobs", len(batch)), slog.Any("error", err))
		select {
		case <-c.quit.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// discard fails a job whose result the store refused.
func (c *completer) discard(comp Completion, reason error) {
	ctx, cancel := context.WithTimeout(c.quit, storeCallTimeout)
	defer cancel()
	errs, err := c.store.Fail(ctx, []Failure{{ID: comp.ID, Token: comp.Token, Message: reason.Error(), Discard: true}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		c.log.Warn("fail a job whose result was refused", slog.Int64("job_id", comp.ID), slog.Any("error", err))
	}
}
