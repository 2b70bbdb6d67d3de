package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// adv2Setup starts a server on an advStore (poll an hour: wake-ups only),
// with waiter W1 waiting in the group of queue (it claimed on arrival and
// found nothing), then W2 waiting behind it (it joined a group that just
// looked, so it did not claim). It returns W1's status channel and W2's
// jobs channel.
func adv2Setup(t *testing.T, as *advStore, queue string, wrap func(readpast.Store) readpast.Store) (*testEnv, <-chan int, <-chan []Job) {
	t.Helper()
	e := newEnv(t, func(c *Config) {
		as.Store = c.Store
		c.Store = as
		if wrap != nil {
			c.Store = wrap(as)
		}
		c.PollInterval = time.Hour
	})
	w1 := make(chan int, 1)
	go func() {
		// Not e.doCtx, which fails the test on a connection the server
		// drops (the panicking handler's).
		resp, err := http.Post(e.srv.URL+"/v1/claim", "application/json",
			strings.NewReader(`{"worker":"w1","queues":["`+queue+`"],"limit":1,"wait_seconds":30}`))
		if err != nil {
			w1 <- 0
			return
		}
		resp.Body.Close()
		w1 <- resp.StatusCode
	}()
	advUntil(t, "W1 waiting", func() bool {
		ok := false
		advGroup(e, queue, func(g *waitGroup) {
			ok = g != nil && len(g.queue) == 1 && !g.lastProbe.IsZero() && g.claiming == 0
		})
		return ok
	})
	as.mu.Lock()
	before := len(as.asked)
	as.mu.Unlock()
	w2 := advClaim(e, queue, 1, "3")
	advUntil(t, "W2 joined", func() bool {
		ok := false
		advGroup(e, queue, func(g *waitGroup) { ok = len(g.queue) == 2 })
		return ok
	})
	time.Sleep(200 * time.Millisecond) // W2 reaches awaitTurn
	as.mu.Lock()
	after := len(as.asked)
	as.mu.Unlock()
	if after != before {
		t.Fatalf("W2 claimed on arrival (%d store claims), the setup wants it waiting", after-before)
	}
	return e, w1, w2
}

// TestWaitersAdversary2FailedTurnStrandsGroup: W1 and W2 wait for queue
// f2. A job is enqueued; its wake-up hands the turn to W1 (dispatch
// clears due), and W1's claim fails (a database error). done(failed)
// zeroes lastProbe but leaves due false, W1 answers 5xx and leaves; no
// turn goes to W2, which waits out its 3 s and answers empty while the job
// was claimable the whole time (it would wait for the hourly poll).
func TestWaitersAdversary2FailedTurnStrandsGroup(t *testing.T) {
	as := newAdvStore()
	e, w1, w2 := adv2Setup(t, as, "f2", nil)
	as.failNext.Store(true)
	js, err := e.store.Enqueue(t.Context(), []readpast.EnqueueParams{{Kind: "k", Queue: "f2"}})
	if err != nil {
		t.Fatal(err)
	}
	if status := <-w1; status < 500 {
		t.Fatalf("W1 answered %d, want its failed claim's 5xx", status)
	}
	got := <-w2
	if len(got) != 1 || got[0].ID != js[0].ID {
		t.Errorf("W2, waiting 3 s behind a turn whose claim failed, got %+v while job %d was claimable the whole time", got, js[0].ID)
	}
}

// panicStore panics in the next Claim after its statement would run.
type panicStore struct {
	*advStore
	panicNext atomic.Bool
}

func (p *panicStore) Claim(ctx context.Context, q readpast.ClaimParams) ([]*readpast.Job, error) {
	if p.panicNext.CompareAndSwap(true, false) {
		panic("adversary: the claim panicked")
	}
	return p.advStore.Claim(ctx, q)
}

// TestWaitersAdversary2PanicLeaksClaiming: a Claim that panics (net/http
// recovers the handler) skips done, so the group's claiming counter stays
// 1: no turn is handed out in the group ever again (W2 waits out its wait
// while a job is claimable), and the group is never pruned, so the
// dispatcher and its subscription outlive every waiter.
func TestWaitersAdversary2PanicLeaksClaiming(t *testing.T) {
	as := newAdvStore()
	var ps *panicStore
	e, w1, w2 := adv2Setup(t, as, "p2", func(s readpast.Store) readpast.Store {
		ps = &panicStore{advStore: s.(*advStore)}
		return ps
	})
	ps.panicNext.Store(true)
	js, err := e.store.Enqueue(t.Context(), []readpast.EnqueueParams{{Kind: "k", Queue: "p2"}})
	if err != nil {
		t.Fatal(err)
	}
	select { // doCtx may end W1's goroutine on the broken connection
	case st := <-w1:
		t.Logf("W1 (panicked) status %d", st)
	case <-time.After(2 * time.Second):
	}
	got := <-w2
	var claiming int
	advGroup(e, "p2", func(g *waitGroup) {
		if g != nil {
			claiming = g.claiming
		}
	})
	if len(got) != 1 || got[0].ID != js[0].ID {
		t.Errorf("after a claim of the group panicked, W2 waited 3 s and got %+v while job %d was claimable (group claiming=%d)", got, js[0].ID, claiming)
	}
	if claiming != 0 {
		t.Errorf("the group's claiming counter is %d with no claim in flight: never pruned, turns never handed out", claiming)
	}
}
