package readpast

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// completer writes successful outcomes in batches: each store.Complete
// carries every completion that queued up while the previous one ran.
type completer struct {
	store Store
	log   *slog.Logger
	in    chan Completion
	wg    sync.WaitGroup

	mu     sync.RWMutex // held for reading while sending on in
	closed bool         // protected by mu
}

// completerWriters is how many batches may be in flight at once.
const completerWriters = 2

// maxCompleteBatch bounds one Complete statement.
const maxCompleteBatch = 2000

func newCompleter(store Store, log *slog.Logger) *completer {
	return &completer{store: store, log: log, in: make(chan Completion, 4*maxCompleteBatch)}
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

// add queues a completion; it blocks while the queue is full. After close
// (a handler that outlived Stop) the completion is dropped and the job's
// lease expires instead.
func (c *completer) add(comp Completion) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.in <- comp
	return true
}

// close writes what is queued and returns when it is written.
func (c *completer) close() {
	c.mu.Lock()
	c.closed = true
	close(c.in)
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *completer) run() {
	batch := make([]Completion, 0, maxCompleteBatch)
	for first := range c.in {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxCompleteBatch {
			select {
			case comp, ok := <-c.in:
				if !ok {
					break fill
				}
				batch = append(batch, comp)
			default:
				break fill
			}
		}
		c.write(batch)
	}
}

// write retries store errors for a while (about a minute at most);
// completions that never land are left to lease expiry (at-least-once).
func (c *completer) write(batch []Completion) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
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
		if attempt == 5 {
			c.log.Error("write completions; leases will expire instead", slog.Int("jobs", len(batch)), slog.Any("error", err))
			return
		}
		c.log.Warn("write completions", slog.Int("jobs", len(batch)), slog.Any("error", err))
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// discard fails a job whose result the store refused.
func (c *completer) discard(comp Completion, reason error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeCallTimeout)
	defer cancel()
	errs, err := c.store.Fail(ctx, []Failure{{ID: comp.ID, Token: comp.Token, Message: reason.Error(), Discard: true}})
	if err == nil {
		err = errs[0]
	}
	if err != nil {
		c.log.Warn("fail a job whose result was refused", slog.Int64("job_id", comp.ID), slog.Any("error", err))
	}
}
