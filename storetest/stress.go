package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// GroupState is one concurrency group as a store holds it, read together
// with the jobs of the group that are running, in one snapshot.
type GroupState struct {
	Group string
	// Row reports whether the store has a row (counter, limit) for the
	// group; without one the group runs nothing and has the default limit.
	Row bool
	// Counter is the store's count of the group's running jobs.
	Counter int
	// Limit is how many of its jobs may run at once.
	Limit int
	// Started holds the start time of each of its running jobs.
	Started []time.Time
}

// limitChange is one SetGroupLimit call: the value may be in force from
// the call's start (before) and surely is from its return (after).
type limitChange struct {
	before, after time.Time
	value         int
}

// limitLog is the history of one group's limit.
type limitLog struct {
	mu      sync.Mutex
	changes []limitChange
}

func (l *limitLog) add(c limitChange) {
	l.mu.Lock()
	l.changes = append(l.changes, c)
	l.mu.Unlock()
}

// most is the largest limit that may have been in force at some moment of
// [from, to].
func (l *limitLog) most(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := 0
	for i, c := range l.changes {
		replaced := i+1 < len(l.changes) && l.changes[i+1].after.Before(from)
		if !c.before.After(to) && !replaced {
			m = max(m, c.value)
		}
	}
	return m
}

// setLimit sets g's limit to v and records the change.
func setLimit(ctx context.Context, s readpast.Store, l *limitLog, g string, v int) error {
	before := time.Now()
	err := s.SetGroupLimit(ctx, g, v)
	// A call that failed (cancelled at the run's end) may have applied the
	// limit all the same: it counts as a change that may have happened.
	l.add(limitChange{before: before, after: time.Now(), value: v})
	return err
}

// limitSlack widens the moment a claim started (the store's started_at)
// to the span in which it may have read the group's limit: a PostgreSQL
// claim locks the group row a little after its statement's now(). After
// that moment the span runs to the end of the claim call at the latest,
// which claimSpans records: on a loaded machine a claim statement can
// take longer than limitSlack between its now() and its lock.
const limitSlack = 100 * time.Millisecond

// claimSpans maps a claim's start on the store's clock (the StartedAt its
// jobs share) to how long the Claim call took, so the limit check knows
// how late that claim may have read a limit.
type claimSpans struct {
	mu    sync.Mutex
	spans map[time.Time]time.Duration
	// ended is when the last claim call had returned. A claim that the
	// run's end cancelled may have committed and returned an error: its
	// jobs run, and its span is unknown, so it may have read a limit at
	// any moment until then.
	ended time.Time
}

// end records that every claim call has returned.
func (c *claimSpans) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = time.Now().UTC()
}

func (c *claimSpans) add(started time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spans == nil {
		c.spans = map[time.Time]time.Duration{}
	}
	c.spans[started] = max(c.spans[started], d)
}

// after is how long after started the claim that started then may have
// read its group's limit.
func (c *claimSpans) after(started time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, known := c.spans[started]
	if !known && !c.ended.IsZero() {
		d = c.ended.Sub(started)
	}
	return max(limitSlack, d)
}

// testGroupStress throws every operation that touches a group at the
// store at once (claims of random sizes from random queues, completions,
// failures retried at once or later, releases, leases left to expire,
// rescues, cancels, retries, late enqueues of every priority, limit
// changes between 1 and 4) while a sampler reads every group in single
// snapshots and checks, each time, that the store's slot counter equals
// the jobs actually running, and, once the run is over, that no sample
// shows a group running more jobs than its limit: all the jobs running
// then were running when the last of them started, so their number is at
// most the limit in force at some moment of that claim (claimSpans).
// No operation may fail (a deadlock that reached a caller would), and the
// database must have detected no deadlock at all.
func testGroupStress(t *testing.T, h Harness) {
	if h.Groups == nil {
		t.Fatal("Harness.Groups is required: the stress test checks the store's counters against its jobs")
	}
	s := newStore(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), h.StressDuration+2*time.Minute)
	defer cancel()
	var deadlocksBefore int64
	if h.Deadlocks != nil {
		var err error
		if deadlocksBefore, err = h.Deadlocks(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	const groups = 12
	queues := []string{"qa", "qb"}
	rng := rand.New(rand.NewPCG(7, 7))
	limits := make([]*limitLog, groups)
	for g := range groups {
		limits[g] = &limitLog{}
		if err := setLimit(ctx, s, limits[g], fmt.Sprint("s", g), 1+rng.IntN(4)); err != nil {
			t.Fatal(err)
		}
	}
	randomJob := func(rng *rand.Rand) readpast.EnqueueParams {
		p := readpast.EnqueueParams{Kind: "k", Queue: queues[rng.IntN(2)], Priority: rng.IntN(5) - 2, MaxAttempts: 1000}
		if rng.IntN(6) != 0 {
			p.Group = fmt.Sprint("s", rng.IntN(groups))
		}
		return p
	}
	var initial []readpast.EnqueueParams
	for range 1500 {
		initial = append(initial, randomJob(rng))
	}
	enqueueMany(t, s, initial)

	run, stop := context.WithCancel(ctx)
	defer stop()
	began := time.Now()
	var wg sync.WaitGroup
	fail := func(format string, args ...any) {
		if run.Err() == nil {
			t.Errorf(format, args...)
		}
	}
	every := func(seed uint64, pause func(*rand.Rand) time.Duration, f func(*rand.Rand)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 3))
			for run.Err() == nil {
				f(rng)
				select {
				case <-run.Done():
				case <-time.After(pause(rng)):
				}
			}
		}()
	}
	ms := func(lo, hi int) func(*rand.Rand) time.Duration {
		return func(r *rand.Rand) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	}
	var (
		spans                         claimSpans
		known                         sync.Map // job id -> struct{}: ids to cancel and retry
		claims, finished, stale       atomic.Int64
		cancels, retries, limitsMoved atomic.Int64
	)
	isExpected := func(err error) bool {
		return errors.Is(err, readpast.ErrStaleToken) || errors.Is(err, readpast.ErrNotFound) || errors.Is(err, readpast.ErrInvalidState)
	}
	// Claimers.
	for w := range max(8, h.Claimers/2) {
		every(uint64(w), ms(0, 1), func(rng *rand.Rand) {
			mine := [][]string{{"qa"}, {"qb"}, {"qa", "qb"}}[rng.IntN(3)]
			lease := []time.Duration{40 * time.Millisecond, 250 * time.Millisecond, 5 * time.Second}[rng.IntN(3)]
			invoked := time.Now()
			got, err := s.Claim(run, readpast.ClaimParams{Queues: mine, Worker: fmt.Sprint("w", w), Limit: 1 + rng.IntN(8), Lease: lease})
			if err != nil {
				fail("claim: %v", err)
				return
			}
			if len(got) > 0 && got[0].StartedAt != nil {
				spans.add(got[0].StartedAt.UTC(), time.Since(invoked))
			}
			claims.Add(int64(len(got)))
			for _, j := range got {
				known.Store(j.ID, struct{}{})
				var err error
				switch r := rng.IntN(100); {
				case r < 5 && lease < time.Second: // outlive the lease: the rescuer ends the claim
					time.Sleep(lease + 20*time.Millisecond)
					err = first(s.Complete(run, []readpast.Completion{{ID: j.ID, Token: j.Token}}))
				case r < 15:
					at := time.Time{}
					if rng.IntN(2) == 0 {
						at = time.Now().Add(20 * time.Millisecond)
					}
					err = first(s.Fail(run, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "stress", RetryAt: at}}))
				case r < 23:
					err = s.Release(run, j.ID, j.Token)
				default:
					if r < 40 {
						time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
					}
					err = first(s.Complete(run, []readpast.Completion{{ID: j.ID, Token: j.Token}}))
				}
				switch {
				case err == nil:
					finished.Add(1)
				case isExpected(err):
					stale.Add(1)
				default:
					fail("finish job %d: %v", j.ID, err)
				}
			}
		})
	}
	// The rescuer.
	wg.Add(1)
	go func() {
		defer wg.Done()
		readpast.RunRescuer(run, s, 5*time.Millisecond, discardLogger())
	}()
	// Late enqueues of every priority.
	every(100, ms(1, 3), func(rng *rand.Rand) {
		batch := make([]readpast.EnqueueParams, 1+rng.IntN(4))
		for i := range batch {
			batch[i] = randomJob(rng)
		}
		if _, err := s.Enqueue(run, batch); err != nil {
			fail("enqueue: %v", err)
		}
	})
	// Limit changes.
	every(101, ms(30, 80), func(rng *rand.Rand) {
		g := rng.IntN(groups)
		if err := setLimit(run, s, limits[g], fmt.Sprint("s", g), 1+rng.IntN(4)); err != nil {
			fail("set group limit: %v", err)
			return
		}
		limitsMoved.Add(1)
	})
	// Cancels and retries of jobs in any state.
	pick := func(rng *rand.Rand) (int64, bool) {
		var id int64
		n := 0
		known.Range(func(k, _ any) bool {
			n++
			if rng.IntN(n) == 0 {
				id = k.(int64)
			}
			return n < 64
		})
		return id, n > 0
	}
	every(102, ms(5, 15), func(rng *rand.Rand) {
		if id, ok := pick(rng); ok {
			if _, err := s.Cancel(run, id); err != nil && !isExpected(err) {
				fail("cancel %d: %v", id, err)
			}
			cancels.Add(1)
		}
	})
	every(103, ms(5, 15), func(rng *rand.Rand) {
		if id, ok := pick(rng); ok {
			if _, err := s.Retry(run, id); err != nil && !isExpected(err) {
				fail("retry %d: %v", id, err)
			}
			retries.Add(1)
		}
	})
	// The sampler. Counters are checked at once; limits once the run is
	// over, when every claim's span is known.
	var samples, busiest atomic.Int64
	var sampled [][]GroupState
	checkLimits := func(states []GroupState) {
		for _, g := range states {
			running := len(g.Started)
			if running == 0 {
				continue
			}
			last := slices.MaxFunc(g.Started, time.Time.Compare)
			var idx int
			if _, err := fmt.Sscanf(g.Group, "s%d", &idx); err != nil || idx < 0 || idx >= groups {
				t.Errorf("unexpected group %q", g.Group)
				continue
			}
			if allowed := limits[idx].most(last.Add(-limitSlack), last.Add(spans.after(last.UTC()))); running > allowed {
				t.Errorf("group %s: %d jobs running, the last started at %s (its claim took %v) when its limit was at most %d",
					g.Group, running, last.Format(time.StampMicro), spans.after(last.UTC()), allowed)
			}
		}
	}
	check := func(states []GroupState) {
		for _, g := range states {
			running := len(g.Started)
			busiest.Store(max(busiest.Load(), int64(running)))
			switch {
			case !g.Row && running > 0:
				t.Errorf("group %s: %d jobs running and no group row", g.Group, running)
			case g.Row && g.Counter != running:
				t.Errorf("group %s: slot counter %d, but %d jobs running", g.Group, g.Counter, running)
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for run.Err() == nil {
			states, err := h.Groups(run, s)
			if err != nil {
				fail("read groups: %v", err)
				return
			}
			check(states)
			sampled = append(sampled, states)
			samples.Add(1)
		}
	}()
	// The run lasts StressDuration or, on a machine too busy to exercise
	// the store enough in that time, until it has, up to four times as
	// long.
	enough := func() bool { return samples.Load() >= 10 && claims.Load() >= 50 && limitsMoved.Load() >= 5 }
	go func() {
		defer stop()
		for d := h.StressDuration; ; d = 50 * time.Millisecond {
			select {
			case <-run.Done():
				return
			case <-time.After(d):
			}
			if enough() || time.Since(began) >= 4*h.StressDuration {
				return
			}
		}
	}()
	wg.Wait()
	ran := time.Since(began).Round(time.Millisecond)
	spans.end()
	for _, states := range sampled {
		checkLimits(states)
	}
	if ctx.Err() != nil {
		t.Fatal("the stress run did not stop in time")
	}
	states, err := h.Groups(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	check(states)
	checkLimits(states)
	if !enough() {
		t.Errorf("the run exercised too little in %v: %d samples, %d claims, %d limit changes", ran, samples.Load(), claims.Load(), limitsMoved.Load())
	}
	if h.Deadlocks != nil {
		after, err := h.Deadlocks(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if after != deadlocksBefore {
			t.Errorf("the database detected %d deadlocks during the run", after-deadlocksBefore)
		}
	}
	t.Logf("%v: %d claims, %d finished, %d stale writes refused, %d cancels, %d retries, %d limit changes, %d snapshots checked, at most %d running in one group",
		ran, claims.Load(), finished.Load(), stale.Load(), cancels.Load(), retries.Load(), limitsMoved.Load(), samples.Load(), busiest.Load())
}

func first(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}
