package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// advStore wraps a store for the adversarial tests of the waiters: it can
// stall the next Claim after its statement (the jobs are claimed and
// committed, the caller has not heard yet), counts the live wake-up
// subscriptions, and records what each Claim call loaded.
type advStore struct {
	readpast.Store

	failNext  atomic.Bool // the next Claim fails, claiming nothing
	stallNext atomic.Bool
	stalled   chan struct{} // receives once a stalled Claim has its jobs
	release   chan struct{} // closed to let the stalled Claim return

	subs atomic.Int64 // live subscriptions

	mu    sync.Mutex
	loads []int // per Claim call: jobBytes of the rows it returned
	asked []int // per Claim call: the limit it asked for
}

func newAdvStore() *advStore {
	return &advStore{stalled: make(chan struct{}, 1), release: make(chan struct{})}
}

func (a *advStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	if a.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("adversary: the claim failed")
	}
	jobs, err := a.Store.Claim(ctx, p)
	n := 0
	for _, j := range jobs {
		n += jobBytes(j)
	}
	a.mu.Lock()
	a.loads, a.asked = append(a.loads, n), append(a.asked, p.Limit)
	a.mu.Unlock()
	if a.stallNext.CompareAndSwap(true, false) {
		a.stalled <- struct{}{}
		<-a.release
	}
	return jobs, err
}

func (a *advStore) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	ch, err := a.Store.(readpast.Notifier).Subscribe(ctx)
	if err == nil {
		a.subs.Add(1)
		context.AfterFunc(ctx, func() { a.subs.Add(-1) })
	}
	return ch, err
}

// advClaim sends a claim of up to limit jobs of queue, waiting up to wait
// seconds, and returns a channel of what it got.
func advClaim(e *testEnv, queue string, limit int, wait string) <-chan []Job {
	got := make(chan []Job, 1)
	go func() {
		status, b := e.doCtx(context.Background(), "POST", "/v1/claim",
			fmt.Sprintf(`{"worker":"w","queues":["%s"],"limit":%d,"wait_seconds":%s}`, queue, limit, wait), "")
		var r JobsResponse
		if status == 200 {
			_ = json.Unmarshal(b, &r)
		}
		got <- r.Jobs
	}()
	return got
}

// advGroup runs f on the group of queue, under the waiters' lock (nil
// when there is none).
func advGroup(e *testEnv, queue string, f func(g *waitGroup)) {
	h := e.server.waiters
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h.groups[groupKey([]string{queue})])
}

// advUntil polls cond every millisecond for up to 20 s.
func advUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitersAdversaryTurnHandedToOwnClaim: a waiter that claims on
// arrival (a new group, or a kept one marked due) is its group's oldest
// waiter, but does not hold the turn. A wake-up for a job committed after
// that claim's statement marks the group due, and the dispatcher hands the
// turn to that same waiter, clearing due, while its claim is in flight.
// The claim comes back short (1 of 2): done(more=false) leaves due false,
// the waiter answers with its one job and leaves, and the turn it never
// used is gone. The group is kept with a fresh lastProbe and no due, so
// the next waiting claim for the queue does not claim on arrival, and the
// job waits for the fallback poll (an hour here): the waiting claim ends
// empty while the job is claimable.
//
// Before the change the claim that got a job marked the group due (found)
// and the group was deleted when its last waiter left, so the next request
// claimed on arrival.
func TestWaitersAdversaryTurnHandedToOwnClaim(t *testing.T) {
	as := newAdvStore()
	e := newEnv(t, func(c *Config) {
		as.Store = c.Store
		c.Store = as
		c.PollInterval = time.Hour // wake-ups only
	})
	ctx := t.Context()
	enqueue := func() int64 {
		t.Helper()
		js, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "adv"}})
		if err != nil {
			t.Fatal(err)
		}
		return js[0].ID
	}
	j0 := enqueue() // before any subscription: its wake-up reaches nobody

	as.stallNext.Store(true)
	first := advClaim(e, "adv", 2, "30") // a new group: claims on arrival
	select {
	case <-as.stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("the first claim did not reach the store")
	}
	var once sync.Once
	unstall := func() { once.Do(func() { close(as.release) }) }
	defer unstall()
	var before string
	advGroup(e, "adv", func(g *waitGroup) {
		before = fmt.Sprintf("%d waiters, holder %v, due %v", len(g.queue), g.holder != nil, g.due)
	})
	t.Logf("before the wake-up: %s", before)

	// A job committed after the claim's statement: its wake-up arrives
	// while the claim is in flight.
	j1 := enqueue()
	// The dispatcher handled the wake-up: it marked the group due (a
	// turn in flight), or handed the turn to the oldest waiter, whose
	// turn channel then holds it.
	advUntil(t, "the dispatcher handling the wake-up", func() bool {
		handled := false
		advGroup(e, "adv", func(g *waitGroup) { handled = g.due || len(g.queue[0].turn) > 0 })
		return handled
	})
	unstall()
	js := <-first
	if len(js) == 0 || js[0].ID != j0 {
		t.Fatalf("the first claim got %+v, want job %d first", js, j0)
	}
	if len(js) == 2 && js[1].ID == j1 {
		return // a later store call of the same claim took it (the build before the change: it asked for 1 at a time)
	}

	// The worker asks again (or another does): job j1 is claimable.
	second := advClaim(e, "adv", 2, "2")
	js = <-second
	if len(js) == 1 && js[0].ID == j1 {
		return
	}
	still := false
	if left, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"adv"}, Worker: "check", Limit: 1, Lease: time.Minute}); err == nil && len(left) == 1 && left[0].ID == j1 {
		still = true
	}
	t.Fatalf("a waiting claim of 2 s got %+v while job %d was claimable (a plain claim then took it: %v): the wake-up handed a turn to a claim already in flight, and the short claim dropped it", js, j1, still)
}

// TestWaitersAdversaryFailedClaimCountsAsProbe: a claim that fails
// (a database error: it learned nothing of the queues) is recorded as a
// look that found nothing (done(more=false) sets lastProbe). The group is
// now kept after its last waiter left, so the client's retry, at once,
// does not claim on arrival, and a job that was there all along waits for
// the fallback poll (an hour here). Before the change the group was
// deleted with its last waiter and the retry claimed on arrival.
func TestWaitersAdversaryFailedClaimCountsAsProbe(t *testing.T) {
	as := newAdvStore()
	e := newEnv(t, func(c *Config) {
		as.Store = c.Store
		c.Store = as
		c.PollInterval = time.Hour
	})
	js, err := e.store.Enqueue(t.Context(), []readpast.EnqueueParams{{Kind: "k", Queue: "fail"}})
	if err != nil {
		t.Fatal(err)
	}
	as.failNext.Store(true)
	status, _ := e.doCtx(context.Background(), "POST", "/v1/claim", `{"worker":"w","queues":["fail"],"wait_seconds":30}`, "")
	if status < 500 {
		t.Fatalf("the failing claim answered %d", status)
	}
	got := <-advClaim(e, "fail", 1, "2") // the client's retry
	if len(got) != 1 || got[0].ID != js[0].ID {
		t.Errorf("the retry of a failed claim waited 2 s and got %+v while job %d was claimable from the start", got, js[0].ID)
	}
}

// TestWaitersAdversaryDispatcherLifetime: promise, no goroutine of the
// waiters outlives a poll interval after the last waiter leaves. prune runs
// at the ticks only (and drops a group idle for at least half an interval,
// or a full one in the first version of the change), so a group whose last
// waiter left just before its idleness would count at the next tick is
// dropped a tick later: the dispatcher and its store subscription live up
// to one and a half intervals (two) after the last waiter left. Here the
// waiter leaves 0.6 intervals after the dispatcher's ticker started; the
// first tick finds it idle 0.4 intervals, the second drops it, 1.4
// intervals after it left; the test looks at 1.2.
func TestWaitersAdversaryDispatcherLifetime(t *testing.T) {
	const poll = 2 * time.Second
	as := newAdvStore()
	e := newEnv(t, func(c *Config) {
		as.Store = c.Store
		c.Store = as
		c.PollInterval = poll
	})
	// One waiting claim that finds nothing and ends after 1.2 s (0.6
	// intervals): the dispatcher started as it joined, its ticker about
	// then.
	if js := <-advClaim(e, "lifetime", 1, "1.2"); len(js) != 0 {
		t.Fatalf("got %+v", js)
	}
	left := time.Now()
	advUntil(t, "the waiter leaving", func() bool {
		gone := false
		advGroup(e, "lifetime", func(g *waitGroup) { gone = g == nil || len(g.queue) == 0 })
		return gone
	})
	time.Sleep(time.Until(left.Add(poll + poll/5)))
	live := as.subs.Load()
	// How long it lives in all, for the report.
	deadline := time.Now().Add(3 * poll)
	for as.subs.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the dispatcher's subscription ended by %v after the last waiter left (poll %v)", time.Since(left).Round(10*time.Millisecond), poll)
	if live > 0 {
		t.Errorf("the waiters' dispatcher still held %d store subscription(s) %v after the last waiter left, with a poll interval of %v", live, poll+poll/5, poll)
	}
}

// TestWaitersAdversaryIdleGroupsTakePolls: the fallback poll looks at
// maxPollsPerTick groups per interval, least recently looked at first.
// Groups kept without waiters (for a poll interval, by this change) are
// candidates too: marked due, they are never dispatched (no waiter), but
// they take the slots, and a group whose waiter waits is passed over for
// that tick. Before the change a group was deleted when its last waiter
// left.
func TestWaitersAdversaryIdleGroupsTakePolls(t *testing.T) {
	const poll = time.Second
	h := newWaiters(nil, poll, slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now()
	for i := range maxPollsPerTick {
		key := fmt.Sprintf("idle%d", i)
		// Left a moment ago; looked at its queues 10 s ago (its waiter
		// joined a group that had found nothing, waited, and timed out).
		h.groups[key] = &waitGroup{key: key, lastProbe: now.Add(-10 * time.Second), idleSince: now.Add(-time.Millisecond)}
	}
	active := &waitGroup{key: "active", lastProbe: now.Add(-5 * time.Second)}
	active.queue = []*waiter{{g: active, turn: make(chan struct{}, 1)}}
	h.groups["active"] = active
	h.markPolls()
	if !active.due {
		t.Errorf("with %d groups kept without waiters, the fallback poll's tick passed over the group with a waiter (looked at 5 s ago): its %d slots went to groups no one waits in", maxPollsPerTick, maxPollsPerTick)
	}
}
