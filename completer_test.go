package readpast

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// completeCounter is a Store that only records Complete calls.
type completeCounter struct {
	Store
	mu    sync.Mutex
	calls []int // jobs per call
}

func (s *completeCounter) Complete(ctx context.Context, cs []Completion) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, len(cs))
	return make([]error, len(cs)), nil
}

// TestCompleterGathersAWindow feeds completions one at a time, 200 µs
// apart, as handlers finishing in a burst do. With a gathering window they
// are written in a few statements; without one, each completion finds the
// writers idle and goes alone.
func TestCompleterGathersAWindow(t *testing.T) {
	const n = 20
	run := func(window time.Duration) []int {
		store := &completeCounter{}
		c := newCompleter(store, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Second, window)
		c.start()
		var settled sync.WaitGroup
		for i := range n {
			settled.Add(1)
			if !c.add(Completion{ID: int64(i + 1), Token: "t"}, settled.Done) {
				t.Fatal("completer closed")
			}
			time.Sleep(200 * time.Microsecond)
		}
		settled.Wait()
		if err := c.close(context.Background(), time.Second); err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		total := 0
		for _, k := range store.calls {
			total += k
		}
		if total != n {
			t.Fatalf("window %s: %d completions written, want %d", window, total, n)
		}
		return store.calls
	}
	if calls := run(300 * time.Millisecond); len(calls) > completerWriters {
		t.Errorf("window 300ms: %d statements %v for a burst of %d, want at most one per writer (%d)", len(calls), calls, n, completerWriters)
	}
	// Without a window a completion waits for nobody, so a writer that
	// was not descheduled writes it alone. On a loaded machine the writers
	// may not run for a few milliseconds and find several waiting: the
	// burst is tried again, up to three times; a completer that held
	// completions back would gather them every time.
	var calls []int
	for range 3 {
		if calls = run(-1); len(calls) >= n/2 {
			break
		}
	}
	if len(calls) < n/2 {
		t.Errorf("no window: %d statements %v for %d completions 200µs apart, want about one each", len(calls), calls, n)
	}
}

// unreachableStore is a Store whose Complete fails like a database that
// cannot be reached: each call hangs until its context ends.
type unreachableStore struct {
	Store
	calls atomic.Int64
}

func (s *unreachableStore) Complete(ctx context.Context, cs []Completion) ([]error, error) {
	s.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCompleterGivesUpAtTheStopDeadline: with the store unreachable, the
// completer would retry for a whole lease (a minute here); close with a
// context that ends gives the writes their grace and then gives them up,
// so Stop returns near its deadline, and says so. With the store fine it
// returns nil at once.
func TestCompleterGivesUpAtTheStopDeadline(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := &unreachableStore{}
	c := newCompleter(store, log, time.Minute, -1)
	c.start()
	settled := make(chan struct{})
	if !c.add(Completion{ID: 1, Token: "t"}, func() { close(settled) }) {
		t.Fatal("completer closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.close(ctx, 200*time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close took %v with a 100ms deadline and 200ms grace", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close: %v, want the deadline's error", err)
	}
	select {
	case <-settled:
	default:
		t.Error("the given-up completion was never settled (its heartbeat would run on)")
	}
	if store.calls.Load() == 0 {
		t.Error("no write was attempted")
	}

	ok := newCompleter(&completeCounter{}, log, time.Minute, -1)
	ok.start()
	ok.add(Completion{ID: 1, Token: "t"}, func() {})
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := ok.close(done, time.Second); err != nil {
		t.Errorf("close with the store fine and the deadline already past: %v, want the queued write made within the grace", err)
	}
}
