package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// waitingIn waits until the group of queue holds n waiting requests and
// is settled: no claim in flight and no turn due.
func waitingIn(t *testing.T, e *testEnv, queue string, n int) {
	t.Helper()
	advUntil(t, fmt.Sprintf("%d requests waiting for %s", n, queue), func() bool {
		settled := false
		advGroup(e, queue, func(g *waitGroup) {
			settled = g != nil && len(g.queue) == n && g.holder == nil && !g.due
		})
		return settled
	})
}

// claimAsync sends a long-polling claim of up to limit jobs of queue and
// returns a channel of what it got.
func claimAsync(e *testEnv, queue string, limit int) <-chan []Job {
	got := make(chan []Job, 1)
	go func() {
		status, b := e.do("POST", "/v1/claim", `{"worker":"w","queues":["`+queue+`"],"limit":`+itoa(int64(limit))+`,"wait_seconds":20}`)
		var r JobsResponse
		if status == 200 {
			_ = json.Unmarshal(b, &r)
		}
		got <- r.Jobs
	}()
	return got
}

// TestOneClaimPerJobEnqueuedOneAtATime: a worker that asks again as soon
// as it got a job, with jobs enqueued one at a time, costs the store one
// claim a job. Each of these made a second claim, which found nothing:
// the first store call of a claim asking for one job under the default
// byte budget (so a claim that got it called again), a group made anew
// for each request after its last waiter left (so each request claimed
// on arrival), and the next waiter claiming at once after a claim that
// got fewer jobs than it asked for.
//
// On PostgreSQL the store's own enqueue no longer wakes its claimers a
// second time when its NOTIFY comes back (postgres.Store.wake): that echo
// made the next request claim on arrival too.
func TestOneClaimPerJobEnqueuedOneAtATime(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			cs := &wakeCountingStore{countingStore: &countingStore{}}
			mut := func(c *Config) {
				cs.Store = c.Store
				c.Store = cs
				c.PollInterval = time.Hour // wake-ups only
			}
			// A wake-up of the store's own now and then costs one more
			// claim: 21 of 20 was seen on both stores. On PostgreSQL a
			// claim that started from a claim position and came back
			// short has the store wake its claimers when the next full
			// claim from the head is due (postgres/claimfrom.go), as
			// often as every 20 times a full claim's duration: 33 of 20
			// on a loaded machine. Each wake-up beyond one a job is
			// allowed a claim (it was two while a request that claimed
			// on arrival for a wake-up was then given a turn for it,
			// TestArrivalClaimAnswersTheWakeUp); each cause of a second
			// claim a job gave 39-58 with at most a few such wake-ups.
			if store == "sqlite" {
				oneClaimPerJob(t, newEnv(t, mut), cs, 2)
				return
			}
			e := newPostgresEnv(t, mut)
			listening(t, e.store.(*postgres.Store))
			oneClaimPerJob(t, e, cs, 2)
		})
	}
}

// wakeCountingStore counts the store's wake-ups that reach the waiting
// claims: each one can cost a claim (a turn, or a claim on arrival).
type wakeCountingStore struct {
	*countingStore
	wakes atomic.Int64
}

func (c *wakeCountingStore) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	in, err := c.countingStore.Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range in {
			c.wakes.Add(1) // counted before it can reach the dispatcher
			select {
			case out <- struct{}{}:
			default: // one is pending: they coalesce, as the store's do
			}
		}
	}()
	return out, nil
}

// listening returns once s's listener hands over a NOTIFY: the wake-ups
// of its start are over.
func listening(t *testing.T, s *postgres.Store) {
	t.Helper()
	if _, err := s.Subscribe(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Pool().Exec(t.Context(), "SELECT pg_notify('readpast', 'backlog')"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.FlowBacklog():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the store's listener did not start within 20 s")
		}
	}
}

// oneClaimPerJob runs the scenarios on e, allowing slack claims more than
// one a job.
func oneClaimPerJob(t *testing.T, e *testEnv, cs *wakeCountingStore, slack int64) {
	ctx := t.Context()
	enqueue := func() {
		t.Helper()
		if _, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "one"}}); err != nil {
			t.Fatal(err)
		}
	}

	// One worker: ask, wait, get the job, ask again.
	const jobs = 20
	first := claimAsync(e, "one", 8)
	waitingIn(t, e, "one", 1)
	before := cs.claims.Load() // the first request's claim on arrival
	wakesBefore := cs.wakes.Load()
	got := first
	for i := range jobs {
		enqueue()
		if js := <-got; len(js) != 1 {
			t.Fatalf("job %d: the waiting claim got %d jobs, want 1", i, len(js))
		}
		if i < jobs-1 {
			got = claimAsync(e, "one", 8)
			waitingIn(t, e, "one", 1)
		}
	}
	// The enqueues woke the store once each; wake-ups beyond those are
	// the store's own.
	extra := max(cs.wakes.Load()-wakesBefore-jobs, 0)
	if n := cs.claims.Load() - before; n < jobs || n > jobs+slack+extra {
		t.Errorf("one worker: %d jobs enqueued one at a time cost %d store claims, want %d (up to %d more, %d for the store's own wake-ups)", jobs, n, jobs, slack+extra, extra)
	}

	// Two waiting requests: the one whose claim got fewer jobs than it
	// asked for leaves the other waiting, without a claim.
	a, b := claimAsync(e, "two", 8), claimAsync(e, "two", 8)
	waitingIn(t, e, "two", 2)
	before, wakesBefore = cs.claims.Load(), cs.wakes.Load()
	if _, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "two"}}); err != nil {
		t.Fatal(err)
	}
	var rest <-chan []Job
	select {
	case js := <-a:
		if len(js) != 1 {
			t.Fatalf("a waiting claim got %d jobs, want 1", len(js))
		}
		rest = b
	case js := <-b:
		if len(js) != 1 {
			t.Fatalf("a waiting claim got %d jobs, want 1", len(js))
		}
		rest = a
	}
	waitingIn(t, e, "two", 1)
	if _, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "two"}}); err != nil {
		t.Fatal(err)
	}
	if js := <-rest; len(js) != 1 {
		t.Fatalf("the other waiting claim got %d jobs, want 1", len(js))
	}
	extra = max(cs.wakes.Load()-wakesBefore-2, 0)
	if n := cs.claims.Load() - before; n < 2 || n > 2+slack+extra {
		t.Errorf("two waiters: 2 jobs enqueued one at a time cost %d store claims, want 2 (up to %d more, %d for the store's own wake-ups)", n, slack+extra, extra)
	}
}
