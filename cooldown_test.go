package readpast_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// claimLog records when each Claim began and what it took.
type claimLog struct {
	readpast.Store
	mu     sync.Mutex
	claims []loggedClaim
}

type loggedClaim struct {
	began       time.Time
	limit, jobs int
}

func (s *claimLog) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	began := time.Now()
	jobs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	s.claims = append(s.claims, loggedClaim{began, p.Limit, len(jobs)})
	s.mu.Unlock()
	return jobs, err
}

// Subscribe passes the store's wake-ups on.
func (s *claimLog) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	return s.Store.(readpast.Notifier).Subscribe(ctx)
}

func (s *claimLog) all() []loggedClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]loggedClaim(nil), s.claims...)
}

// countingWorkers counts the jobs of kind k that ran.
func countingWorkers(done *atomic.Int32) *readpast.Workers {
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		done.Add(1)
		return nil, nil
	}, nil)
	return w
}

// TestFetchCooldownGathersJobs: after a claim that found the queue empty
// of further jobs, jobs announced one by one within the cooldown (four,
// 20 ms apart, in a second) go in one claim, which starts no sooner than
// the cooldown after the short one.
// Without the cooldown each announcement is claimed on its own.
func TestFetchCooldownGathersJobs(t *testing.T) {
	ctx := context.Background()
	s := &claimLog{Store: newSQLiteStore(t)}
	var done atomic.Int32
	const cooldown = time.Second
	c := startClient(t, s, readpast.Config{Workers: countingWorkers(&done), PollInterval: time.Minute, FetchCooldown: cooldown})
	if _, err := c.Enqueue(ctx, readpast.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the first job", func() bool { return done.Load() == 1 })
	before := len(s.all())
	const later = 4
	for range later {
		if _, err := c.Enqueue(ctx, readpast.EnqueueParams{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "the later jobs", func() bool { return done.Load() == 1+later })
	claims := s.all()
	short := claims[before-1] // the claim that took the first job
	var took []int
	for _, cl := range claims[before:] {
		if cl.jobs > 0 {
			took = append(took, cl.jobs)
			if gap := cl.began.Sub(short.began); gap < cooldown {
				t.Errorf("a claim began %v after the short claim, within the %v cooldown", gap, cooldown)
			}
		}
	}
	if len(took) != 1 {
		t.Errorf("the %d jobs announced within the cooldown were claimed %v at a time, want all in one claim", later, took)
	}
}

// TestFetchCooldownSparesABacklog: claims that come back full are followed
// at once, whatever the cooldown: a backlog of 40 jobs in claims of at
// most 4 drains in moments, not in ten cooldowns of a second.
func TestFetchCooldownSparesABacklog(t *testing.T) {
	ctx := context.Background()
	s := &claimLog{Store: newSQLiteStore(t)}
	const n = 40
	params := make([]readpast.EnqueueParams, n)
	for i := range params {
		params[i] = readpast.EnqueueParams{Kind: "k"}
	}
	if _, err := s.Enqueue(ctx, params); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	start := time.Now()
	startClient(t, s, readpast.Config{Workers: countingWorkers(&done), PollInterval: time.Minute,
		FetchCooldown: time.Second, Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 4}}})
	waitFor(t, 5*time.Second, "the backlog to drain", func() bool { return done.Load() == n })
	// Only the claim that took the last jobs may have come back short
	// with some.
	claims, short := s.all(), 0
	for _, cl := range claims {
		if cl.jobs > 0 && cl.jobs < cl.limit {
			short++
		}
	}
	if short > 1 {
		t.Errorf("%d claims came back short with jobs left: %+v", short, claims)
	}
	t.Logf("%d jobs in %d claims, %v", n, len(claims), time.Since(start))
}

// TestFetchCooldownValidated: a cooldown over a second is refused.
func TestFetchCooldownValidated(t *testing.T) {
	_, err := readpast.NewClient(newSQLiteStore(t), readpast.Config{Workers: countingWorkers(new(atomic.Int32)), FetchCooldown: 2 * time.Second})
	if !errors.Is(err, readpast.ErrInvalid) {
		t.Errorf("NewClient with a 2s cooldown = %v, want ErrInvalid", err)
	}
}

// TestFreedSlotsWaitForCompanyAtMostTheCooldown: a slot freed while the
// rest of the pool is busy waits up to the fetch cooldown for others to
// free, so that they are filled by one claim, and no longer: with 8
// workers busy on long jobs and jobs waiting, one handler's return gets
// a claim one cooldown later (before, a claim waited for a quarter of
// the pool to be free, and a lone free slot stayed empty while jobs
// waited), and three that return together share one.
func TestFreedSlotsWaitForCompanyAtMostTheCooldown(t *testing.T) {
	ctx := context.Background()
	s := &claimLog{Store: newSQLiteStore(t)}
	const pool, n = 8, 12
	const cooldown = time.Second
	params := make([]readpast.EnqueueParams, n)
	for i := range params {
		params[i] = readpast.EnqueueParams{Kind: "k"}
	}
	if _, err := s.Enqueue(ctx, params); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	gates := map[int64]chan struct{}{} // the running jobs, each held until its gate closes
	var started atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		gate := make(chan struct{})
		mu.Lock()
		gates[job.ID] = gate
		mu.Unlock()
		started.Add(1)
		select {
		case <-gate:
		case <-ctx.Done():
		}
		return nil, nil
	}, nil)
	startClient(t, s, readpast.Config{Workers: w, PollInterval: time.Minute, FetchCooldown: cooldown,
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: pool}}})
	waitFor(t, 10*time.Second, "the pool to fill", func() bool { return started.Load() == pool })
	release := func(k int) time.Time {
		mu.Lock()
		defer mu.Unlock()
		at := time.Now()
		for id, gate := range gates {
			if k == 0 {
				break
			}
			if gate != nil {
				close(gate)
				gates[id] = nil
				k--
			}
		}
		return at
	}
	claimsSince := func(at time.Time) []loggedClaim {
		var out []loggedClaim
		for _, cl := range s.all() {
			if !cl.began.Before(at) {
				out = append(out, cl)
			}
		}
		return out
	}

	t.Cleanup(func() { release(n) }) // before the client stops

	at := release(1)
	waitFor(t, 10*time.Second, "a job in the freed slot", func() bool { return started.Load() == pool+1 })
	claims := claimsSince(at)
	if len(claims) != 1 || claims[0].jobs != 1 {
		t.Fatalf("claims after one slot freed: %+v, want one of 1 job", claims)
	}
	if waited := claims[0].began.Sub(at); waited < cooldown-10*time.Millisecond {
		t.Errorf("the freed slot was claimed %v after it freed, want about the cooldown (%v), waiting for company", waited, cooldown)
	}

	at = release(3)
	waitFor(t, 10*time.Second, "jobs in the three freed slots", func() bool { return started.Load() == n })
	if claims := claimsSince(at); len(claims) != 1 || claims[0].jobs != 3 {
		t.Errorf("claims after three slots freed together: %+v, want one of 3 jobs", claims)
	}
}
