package wake

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBroadcastCoalesces(t *testing.T) {
	h := New()
	ch, err := h.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.Broadcast() // never blocks, even with nobody reading
	}
	<-ch
	select {
	case <-ch:
		t.Fatal("five broadcasts delivered more than one signal")
	default:
	}
}

func TestChannelClosedByContextAndClose(t *testing.T) {
	h := New()
	ctx, cancel := context.WithCancel(context.Background())
	byCtx, _ := h.Subscribe(ctx)
	byClose, _ := h.Subscribe(context.Background())
	cancel()
	waitClosed(t, byCtx)
	h.Close()
	waitClosed(t, byClose)
	h.Broadcast() // no send on a closed channel
	if _, err := h.Subscribe(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
	h.Close() // twice is fine
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed")
		}
	}
}
