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

// add queues a completion; it blocks while the queue is full.
func (c *completer) add(comp Completion) { c.in <- comp }

// close writes what is queued and returns when it is written.
func (c *completer) close() {
	close(c.in)
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

// write retries store errors for a while; completions that never land are
// left to lease expiry (at-least-once).
func (c *completer) write(batch []Completion) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs, err := c.store.Complete(ctx, batch)
		cancel()
		if err == nil {
			for i, e := range errs {
				if e != nil && !errors.Is(e, ErrStaleToken) {
					c.log.Warn("completion refused", slog.Int64("job_id", batch[i].ID), slog.Any("error", e))
				} else if e != nil {
					c.log.Warn("completion refused: claim no longer current", slog.Int64("job_id", batch[i].ID))
				}
			}
			return
		}
		if attempt == 10 {
			c.log.Error("write completions; leases will expire instead", slog.Int("jobs", len(batch)), slog.Any("error", err))
			return
		}
		c.log.Warn("write completions", slog.Int("jobs", len(batch)), slog.Any("error", err))
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}
