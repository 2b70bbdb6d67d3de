package readpast

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// hangingStore is a Store whose maintenance calls hang until their context
// ends, as calls on a half-open connection do, and count themselves.
type hangingStore struct {
	Store
	rescues     atomic.Int64
	unboundedAt atomic.Int64 // rescues called without a deadline
	tidies      atomic.Int64
}

func (s *hangingStore) RescueExpired(ctx context.Context, limit int) (int, error) {
	s.rescues.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		s.unboundedAt.Add(1)
	}
	return 0, nil
}

func (s *hangingStore) Tidy(ctx context.Context) (int, error) {
	s.tidies.Add(1)
	<-ctx.Done() // a vacuum that never ends
	return 0, ctx.Err()
}

// TestRescuerNeverHangs: a rescue is bounded by a deadline, and a Tidy
// that does not return delays no rescue.
func TestRescuerNeverHangs(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &hangingStore{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunRescuer(ctx, s, 5*time.Millisecond, log)
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunRescuer did not return after its context ended")
	}
	if s.tidies.Load() == 0 {
		t.Fatal("Tidy was never called")
	}
	if n := s.rescues.Load(); n < 10 {
		t.Errorf("%d rescues in 300ms at a 5ms interval while Tidy hangs, want dozens", n)
	}
	if n := s.unboundedAt.Load(); n > 0 {
		t.Errorf("%d rescue calls had no deadline", n)
	}
}
