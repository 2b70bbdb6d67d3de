package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// countingStore counts Store.Claim calls and keeps the store's wake-ups.
type countingStore struct {
	readpast.Store
	claims   atomic.Int64 // calls begun
	returned atomic.Int64 // calls ended
}

func (c *countingStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	c.claims.Add(1)
	defer c.returned.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *countingStore) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	return c.Store.(readpast.Notifier).Subscribe(ctx)
}

// startWaiters starts n long-polling claims, each for the queues named by
// queues(i), and returns a channel of what each got, and a cancel that
// ends the ones still waiting.
func startWaiters(e *testEnv, n int, queues func(i int) string, wait string) (<-chan []Job, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []Job, n)
	for i := range n {
		go func() {
			status, b := e.doCtx(ctx, "POST", "/v1/claim", fmt.Sprintf(`{"worker":"w%d","queues":%s,"wait_seconds":%s}`, i, queues(i), wait), "")
			var r JobsResponse
			if status == 200 {
				_ = json.Unmarshal(b, &r)
			}
			got <- r.Jobs
		}()
	}
	return got, cancel
}

// TestIdleWaitersShareOnePoll: the claims N idle waiters make do not grow
// with N. Before, every waiting request claimed on its own every poll
// interval: N times the load.
func TestIdleWaitersShareOnePoll(t *testing.T) {
	const poll = 50 * time.Millisecond
	const window = time.Second
	perN := map[int]int64{}
	for _, n := range []int{1, 50, 200} {
		cs := &countingStore{}
		e := newEnv(t, func(c *Config) {
			cs.Store = c.Store
			c.Store = cs
			c.PollInterval = poll
		})
		_, cancel := startWaiters(e, n, func(int) string { return `["idle"]` }, "30")
		// Every waiter makes one claim as it arrives. Measure once those
		// have all returned: on a loaded machine the arrivals' claims queue
		// for the store for a while, and the poll's claims queue behind them.
		deadline := time.Now().Add(30 * time.Second)
		for cs.returned.Load() < int64(n) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * poll)
		before := cs.claims.Load()
		time.Sleep(window)
		perN[n] = cs.claims.Load() - before
		cancel()
	}
	// One claim per poll interval, with room for a slow machine's timing.
	limit := int64(2 * window / poll)
	for n, c := range perN {
		if c > limit || c < 2 {
			t.Errorf("%d idle waiters made %d claims in %v, want between 2 and %d (one per %v)", n, c, window, limit, poll)
		}
	}
	t.Logf("claims in %v by idle waiters: %v", window, perN)
}

// TestRepollingWaitersShareOnePoll: waiters that come back as soon as their
// wait ends, as workers do, do not claim on every arrival while others
// wait for the same queues and found nothing a moment ago.
func TestRepollingWaitersShareOnePoll(t *testing.T) {
	const poll = 50 * time.Millisecond
	const n = 50
	cs := &countingStore{}
	e := newEnv(t, func(c *Config) {
		cs.Store = c.Store
		c.Store = cs
		c.PollInterval = poll
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var requests atomic.Int64
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				e.doCtx(ctx, "POST", "/v1/claim", `{"worker":"w","queues":["repoll"],"wait_seconds":0.1}`, "")
				requests.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	before, reqBefore := cs.claims.Load(), requests.Load()
	time.Sleep(time.Second)
	claims, reqs := cs.claims.Load()-before, requests.Load()-reqBefore
	cancel()
	wg.Wait()
	if limit := int64(4 * time.Second / poll); claims > limit {
		t.Errorf("%d long polls of 0.1 s by %d waiters made %d claims in 1 s, want at most %d", reqs, n, claims, limit)
	}
	t.Logf("%d long polls, %d claims in 1 s", reqs, claims)
}

// TestDistinctQueueSetsBounded: waiters on many different queue sets are
// polled at most maxPollsPerTick at a time.
func TestDistinctQueueSetsBounded(t *testing.T) {
	const poll = 50 * time.Millisecond
	const n = 100
	cs := &countingStore{}
	e := newEnv(t, func(c *Config) {
		cs.Store = c.Store
		c.Store = cs
		c.PollInterval = poll
	})
	_, cancel := startWaiters(e, n, func(i int) string { return fmt.Sprintf(`["q%d"]`, i) }, "30")
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for cs.claims.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := cs.claims.Load()
	time.Sleep(time.Second)
	got := cs.claims.Load() - before
	if limit := int64(2 * maxPollsPerTick * int(time.Second/poll)); got > limit {
		t.Errorf("%d waiters on distinct queues made %d claims in 1s, want at most %d", n, got, limit)
	}
	// Every queue set is still looked at: a job due in any queue is found
	// without a wake-up.
	e2 := newEnv(t, func(c *Config) { c.Store = noNotify{c.Store}; c.PollInterval = poll })
	got2, cancel2 := startWaiters(e2, 40, func(i int) string { return fmt.Sprintf(`["p%d"]`, i) }, "30")
	defer cancel2()
	time.Sleep(300 * time.Millisecond)
	j := e2.enqueue(`{"kind":"k","queue":"p37"}`)
	select {
	case jobs := <-got2:
		if len(jobs) != 1 || jobs[0].ID != j.ID {
			t.Errorf("the waiter got %+v", jobs)
		}
	case <-time.After(10 * time.Second):
		t.Error("a job in one of 40 polled queue sets was not found")
	}
}

// TestWaitersWokenInTurn: with the fallback poll out of the way (a
// minute), an enqueue of k jobs reaches k of N waiters at once through the
// store's wake-up, each claiming in turn; the others keep waiting, and a
// waiter on another queue gets its own job.
func TestWaitersWokenInTurn(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PollInterval = time.Minute })
	const n, k = 20, 7
	got, cancel := startWaiters(e, n, func(int) string { return `["turns"]` }, "30")
	defer cancel()
	other, cancelOther := startWaiters(e, 1, func(int) string { return `["elsewhere","turns-not"]` }, "30")
	defer cancelOther()
	time.Sleep(300 * time.Millisecond)

	jobs := make([]string, k)
	for i := range jobs {
		jobs[i] = `{"kind":"t","queue":"turns"}`
	}
	e.must("POST", "/v1/jobs/batch", `{"jobs":[`+join(jobs)+`]}`, 201, nil)
	seen := map[int64]bool{}
	timeout := time.After(10 * time.Second)
	for len(seen) < k {
		select {
		case js := <-got:
			if len(js) != 1 || seen[js[0].ID] {
				t.Fatalf("a waiter got %+v (seen %v)", js, seen)
			}
			seen[js[0].ID] = true
		case <-timeout:
			t.Fatalf("only %d of %d jobs reached the waiters", len(seen), k)
		}
	}
	select {
	case js := <-got:
		t.Fatalf("a waiter returned %+v with nothing left to claim", js)
	case <-time.After(300 * time.Millisecond):
	}
	j := e.enqueue(`{"kind":"o","queue":"elsewhere"}`)
	select {
	case js := <-other:
		if len(js) != 1 || js[0].ID != j.ID {
			t.Errorf("the other waiter got %+v", js)
		}
	case <-time.After(10 * time.Second):
		t.Error("the waiter on another queue was not woken")
	}
}

// TestWaitersConcurrentChurn: waiters coming and going while jobs arrive
// lose nothing: every job is claimed exactly once, and none waits for
// the (minute-long) fallback poll.
func TestWaitersConcurrentChurn(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.PollInterval = time.Minute })
	const jobs = 60
	var claimed sync.Map
	var count atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			for ctx.Err() == nil && count.Load() < jobs {
				wait := []string{"0.05", "0.3", "5"}[i%3]
				status, b := e.doCtx(ctx, "POST", "/v1/claim", `{"worker":"c","queues":["churn"],"limit":2,"wait_seconds":`+wait+`}`, "")
				var r JobsResponse
				if status != 200 || json.Unmarshal(b, &r) != nil {
					continue
				}
				for _, j := range r.Jobs {
					if _, dup := claimed.LoadOrStore(j.ID, true); dup {
						t.Errorf("job %d claimed twice", j.ID)
					}
					if count.Add(1) == jobs {
						cancel() // end the claims still waiting
					}
				}
			}
		})
	}
	for range jobs {
		e.enqueue(`{"kind":"c","queue":"churn"}`)
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Errorf("%d of %d jobs claimed after 20 s", count.Load(), jobs)
		cancel()
		<-done
	}
	if count.Load() != jobs {
		t.Errorf("claimed %d jobs, want %d", count.Load(), jobs)
	}
}

func join(parts []string) string {
	out := ""
	for i, p := range parts {
		if i > 0 {
			out += ","
		}
		out += p
	}
	return out
}

// TestClaimSaysHowLongItWaited: a claim that takes jobs says how long
// the server held it before the claim that took them began, which a
// worker adds to when it sent the claim to count the leases: never more
// than the request took, and the whole wait of a long poll answered late.
func TestClaimSaysHowLongItWaited(t *testing.T) {
	e := newEnv(t, nil)
	claim := func(body string) (JobsResponse, time.Duration) {
		t.Helper()
		var r JobsResponse
		began := time.Now()
		e.must("POST", "/v1/claim", body, 200, &r)
		return r, time.Since(began)
	}
	// Nothing claimed: no waited_seconds.
	if r, _ := claim(`{"queues":["wt"],"worker":"w"}`); len(r.Jobs) != 0 || r.WaitedSeconds != nil {
		t.Fatalf("an empty claim: %+v", r)
	}
	// Claimed at once.
	e.enqueue(`{"kind":"k","queue":"wt"}`)
	r, took := claim(`{"queues":["wt"],"worker":"w"}`)
	if len(r.Jobs) != 1 || r.WaitedSeconds == nil || *r.WaitedSeconds < 0 || *r.WaitedSeconds > took.Seconds() {
		t.Fatalf("a claim answered at once: %+v (took %v)", r, took)
	}
	// A long poll whose job comes 400 ms in.
	go func() {
		time.Sleep(400 * time.Millisecond)
		e.do("POST", "/v1/jobs", `{"kind":"k","queue":"wt"}`)
	}()
	r, took = claim(`{"queues":["wt"],"worker":"w","wait_seconds":10}`)
	if len(r.Jobs) != 1 || r.WaitedSeconds == nil || *r.WaitedSeconds < 0.4 || *r.WaitedSeconds > took.Seconds() {
		t.Fatalf("a long poll answered 400 ms in: %+v (took %v); want waited_seconds from 0.4 to what it took", r, took)
	}
}
