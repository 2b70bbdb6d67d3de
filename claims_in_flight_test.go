package readpast_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// overlapStore holds each Claim until another one is in flight (or a
// while has passed), and checks at every Claim that the handlers running
// and the limits of the claims in flight never add up to more than the
// pool.
type overlapStore struct {
	readpast.Store
	pool    int
	running *atomic.Int32 // handlers running

	mu          sync.Mutex
	inFlight    int
	limits      int // the limits of the claims in flight
	maxInFlight int
	overbooked  string
	arrived     chan struct{} // closed when a claim arrives, then renewed
}

func (s *overlapStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	s.mu.Lock()
	s.inFlight++
	s.limits += p.Limit
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	if n := int(s.running.Load()) + s.limits; n > s.pool && s.overbooked == "" {
		s.overbooked = fmt.Sprintf("%d handlers running and claims in flight for %d slots, in a pool of %d", s.running.Load(), s.limits, s.pool)
	}
	close(s.arrived)
	s.arrived = make(chan struct{})
	next := s.arrived
	s.mu.Unlock()
	select {
	case <-next:
	case <-time.After(200 * time.Millisecond):
	}
	jobs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	s.inFlight--
	s.limits -= p.Limit
	s.mu.Unlock()
	return jobs, err
}

// TestClaimsOverlap: a queue keeps a second claim in flight for the slots
// that free up while its first claim waits for the database, never more
// than two, and never for more slots than are free. With one claim at a
// time (as before), the second claim never comes while the first waits.
func TestClaimsOverlap(t *testing.T) {
	ctx := context.Background()
	sq := newSQLiteStore(t)
	var running atomic.Int32
	const pool = 8
	s := &overlapStore{Store: sq, pool: pool, running: &running, arrived: make(chan struct{})}
	var done atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		running.Add(1)
		defer running.Add(-1)
		// Uneven, so that handlers finish one by one and slots free up
		// while a claim is out.
		time.Sleep(time.Duration(2+job.ID%7) * time.Millisecond)
		done.Add(1)
		return nil, nil
	}, nil)
	const n = 300
	params := make([]readpast.EnqueueParams, n)
	for i := range params {
		params[i] = readpast.EnqueueParams{Kind: "k"}
	}
	if _, err := sq.Enqueue(ctx, params); err != nil {
		t.Fatal(err)
	}
	startClient(t, s, readpast.Config{Workers: w, PollInterval: 10 * time.Millisecond,
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: pool}}})
	// A claim that no other joins waits 200 ms: on a loaded machine,
	// where slots free one at a time, that is up to n claims of one job
	// each (60 s); the checks below do not depend on the time.
	waitFor(t, 90*time.Second, "every job to run", func() bool { return done.Load() == n })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overbooked != "" {
		t.Errorf("overbooked: %s", s.overbooked)
	}
	if s.maxInFlight != 2 {
		t.Errorf("at most %d claims were in flight at once, want 2", s.maxInFlight)
	}
}

// heldClaimStore holds its first Claim until released; then that claim
// returns nothing when short is set (as a claim whose snapshot predates a
// job does), and what the store gives otherwise. Its wake-ups are the
// test's own.
type heldClaimStore struct {
	readpast.Store
	short   bool
	wake    chan struct{}
	started chan struct{} // closed when the first claim begins
	release chan struct{} // the first claim returns once this is closed
	calls   atomic.Int32
}

func newHeldClaimStore(t *testing.T, short bool) *heldClaimStore {
	return &heldClaimStore{Store: newSQLiteStore(t), short: short, wake: make(chan struct{}, 1),
		started: make(chan struct{}), release: make(chan struct{})}
}

func (s *heldClaimStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	if s.calls.Add(1) == 1 {
		close(s.started)
		<-s.release
		if s.short {
			return []*readpast.Job{}, nil
		}
	}
	return s.Store.Claim(ctx, p)
}

func (s *heldClaimStore) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	out := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				select {
				case out <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// waitStarted waits for the held claim to begin.
func (s *heldClaimStore) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim")
	}
}

// TestWakeUpDuringAClaimIsKept: a wake-up that arrives while a claim is
// out, when that claim comes back short (its snapshot predates the job
// the wake-up announces), makes the producer claim again at once, not at
// the next poll. With claims on goroutines, the loop takes the wake-up
// while the claim is out; the short claim's result then cleared it, and
// the job waited for the poll.
func TestWakeUpDuringAClaimIsKept(t *testing.T) {
	ctx := context.Background()
	s := newHeldClaimStore(t, true)
	ran := make(chan struct{}, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		ran <- struct{}{}
		return nil, nil
	}, nil)
	startClient(t, s, readpast.Config{Workers: w, PollInterval: time.Minute})
	s.waitStarted(t)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	s.wake <- struct{}{}
	time.Sleep(200 * time.Millisecond) // the producer takes the wake-up while the claim is out
	close(s.release)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the job waited for the next poll: the wake-up that came during the claim was lost")
	}
}

// TestStopWaitsForAClaimInFlight: Stop called while a claim is out waits
// for it, and the jobs it took run (or are released) before Stop
// returns: none is left running under a lease nobody holds. With claims on
// goroutines, a producer that returned at once would leave them so.
func TestStopWaitsForAClaimInFlight(t *testing.T) {
	ctx := context.Background()
	s := newHeldClaimStore(t, false)
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		ran.Add(1)
		return nil, nil
	}, nil)
	c := startClient(t, s, readpast.Config{Workers: w, PollInterval: time.Minute})
	s.waitStarted(t)
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stopped <- c.Stop(sctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a claim was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(s.release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
	for _, j := range jobs {
		if got := stateOf(t, s, j.ID); got.State == readpast.StateRunning {
			t.Fatalf("job %d left running after Stop (handlers ran %d times)", j.ID, ran.Load())
		}
	}
	if ran.Load() != 2 {
		t.Fatalf("handlers ran %d times, want 2: the claim's jobs were not started", ran.Load())
	}
}
