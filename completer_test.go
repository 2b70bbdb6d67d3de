package readpast

import (
	"context"
	"io"
	"log/slog"
	"sync"
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
		c.close()
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
	if calls := run(-1); len(calls) < n/2 {
		t.Errorf("no window: %d statements %v for %d completions 200µs apart, want about one each", len(calls), calls, n)
	}
}
