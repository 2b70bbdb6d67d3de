package httpapi

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestClaimOnArrivalAnswersAnEarlierTurn replays the window between a
// request joining its group and its claim on arrival: the dispatcher
// hands it the group's turn there (it is the oldest waiter of a due
// group). Its claim on arrival begins after whatever made the group due,
// so it answers that turn too; before, the turn stayed in its channel,
// and after an empty claim on arrival the request claimed again at once
// for the same signal.
func TestClaimOnArrivalAnswersAnEarlierTurn(t *testing.T) {
	h := newWaiters(nil, time.Hour, slog.New(slog.DiscardHandler)) // no wake-ups; polls an hour apart
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := h.join(ctx, []string{"q"})
	defer h.leave(w)
	h.markAll()
	h.dispatch() // the turn goes out between the join and the claim
	if len(w.turn) != 1 {
		t.Fatal("the dispatcher did not hand the turn to the only waiter of a due group")
	}
	if !h.claimFirst(w) {
		t.Fatal("the first request of a new group waits without claiming")
	}
	h.claiming(w)
	h.done(w, false, false) // found nothing
	select {
	case <-w.turn:
		t.Fatal("a turn handed out before the claim on arrival began is still pending after it: a second claim for the same signal")
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := w.g; g.holder != nil || g.due || g.claiming != 0 {
		t.Fatalf("group after the claim: holder %v, due %v, claims in flight %d; want none, false, 0", g.holder, g.due, g.claiming)
	}
}
