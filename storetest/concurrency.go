package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// event is one operation in a run's history, as the worker saw it. The
// times are the worker's: invoked before the call, returned after it.
type event struct {
	op       string // "claim", "complete", "fail"
	id       int64
	token    string
	call     int64 // claim only: which Claim call took the job
	worker   int
	group    string
	prio     int // claim only
	invoked  time.Time
	returned time.Time
	lease    time.Duration // claim only
	claimed  time.Time     // claim only: the job's StartedAt, the store's clock when the claim took the job
	accepted bool          // complete/fail: the store took it
}

// recorder keeps one history per worker (no locking on the hot path).
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(evs []event) {
	r.mu.Lock()
	r.events = append(r.events, evs...)
	r.mu.Unlock()
}

// checkHistory verifies the invariants over a whole run:
//   - every Claim call has its own token (all jobs of one call share it),
//     so no (job, token) pair is handed out twice;
//   - no job is held by two claims at once while a lease is valid: a claim
//     is valid from when it returned until the earlier of (claim invoked +
//     lease) and the invocation of its own accepted complete/fail; the next
//     claim of the job must return after that;
//   - every job has exactly one accepted completion, with the token of its
//     last claim, and ends succeeded.
func checkHistory(t *testing.T, s readpast.Store, jobs []*readpast.Job, evs []event) (claims, stale int) {
	t.Helper()
	type claimRec struct {
		event
		end time.Time // end of the conservative validity window
	}
	type pair struct {
		id    int64
		token string
	}
	byPair := map[pair]*claimRec{}
	callOf := map[string]int64{} // token -> the Claim call that issued it
	perJob := map[int64][]*claimRec{}
	for _, e := range evs {
		if e.op != "claim" {
			continue
		}
		claims++
		if c, ok := callOf[e.token]; ok && c != e.call {
			t.Errorf("token %s issued by two Claim calls", e.token)
		}
		callOf[e.token] = e.call
		k := pair{e.id, e.token}
		if byPair[k] != nil {
			t.Errorf("job %d handed out twice with token %s", e.id, e.token)
			continue
		}
		c := &claimRec{event: e, end: e.invoked.Add(e.lease)}
		byPair[k] = c
		perJob[e.id] = append(perJob[e.id], c)
	}
	accepted := map[int64][]event{}
	for _, e := range evs {
		if e.op == "claim" {
			continue
		}
		c := byPair[pair{e.id, e.token}]
		if c == nil {
			t.Errorf("%s of job %d with a token never claimed", e.op, e.id)
			continue
		}
		if !e.accepted {
			stale++
			continue
		}
		if e.invoked.Before(c.end) {
			c.end = e.invoked
		}
		if e.op == "complete" {
			accepted[e.id] = append(accepted[e.id], e)
		}
	}
	for id, cs := range perJob {
		// In the order the store made the claims: a claim may take a job
		// only once the claim before has expired, after its own start
		// by the lease. (The order the calls returned in is not it: a
		// caller descheduled longer than a 30 ms lease saw its claim
		// return after the job's next claim, by another worker, had
		// returned and even completed it. StartedAt is the store's clock
		// when the claim took the job, after its snapshot, not when its
		// transaction began: TestStartedAtIsTheClaimsTime.)
		sort.Slice(cs, func(i, j int) bool { return cs[i].claimed.Before(cs[j].claimed) })
		for i := 1; i < len(cs); i++ {
			a, b := cs[i-1], cs[i]
			if b.returned.Before(a.end) {
				t.Errorf("job %d held twice: claim by worker %d valid until %v, claim by worker %d returned at %v",
					id, a.worker, a.end.Format(time.StampMicro), b.worker, b.returned.Format(time.StampMicro))
			}
		}
	}
	for _, j := range jobs {
		acc := accepted[j.ID]
		if len(acc) != 1 {
			t.Errorf("job %d: %d accepted completions, want exactly 1", j.ID, len(acc))
			continue
		}
		cs := perJob[j.ID]
		if last := cs[len(cs)-1]; last.token != acc[0].token {
			t.Errorf("job %d completed by claim %s, but its last claim was %s", j.ID, acc[0].token, last.token)
		}
	}
	// The store agrees: every job succeeded.
	ctx := context.Background()
	for _, j := range jobs {
		g, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g.State != readpast.StateSucceeded {
			t.Errorf("job %d ended %s, want succeeded", j.ID, g.State)
		}
	}
	return claims, stale
}

// claimRecorded claims as worker w with p and records one claim event per
// job, timed from just before the call to just after it. An empty claim
// waits a millisecond. ok is false when the worker should stop (the run
// ended, or the claim failed, which fails the test).
func claimRecorded(ctx context.Context, t *testing.T, s readpast.Store, w int, p readpast.ClaimParams, evs *[]event) (got []*readpast.Job, ok bool) {
	p.Worker = fmt.Sprint("w", w)
	inv := time.Now()
	got, err := s.Claim(ctx, p)
	ret := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("claim: %v", err)
		}
		return nil, false
	}
	if len(got) == 0 {
		time.Sleep(time.Millisecond)
	}
	// Calls that took jobs get distinct ids: the worker, and how many
	// events it had recorded before.
	call := int64(w)<<40 | int64(len(*evs))
	for _, j := range got {
		g := ""
		if j.Group != nil {
			g = *j.Group
		}
		var claimed time.Time
		if j.StartedAt != nil {
			claimed = *j.StartedAt
		} else {
			t.Errorf("claimed job %d has no StartedAt", j.ID)
		}
		*evs = append(*evs, event{op: "claim", id: j.ID, token: j.Token, call: call, worker: w, group: g, prio: j.Priority, invoked: inv, returned: ret, lease: p.Lease, claimed: claimed})
	}
	return got, true
}

// enqueueMany enqueues jobs in batches of 1000.
func enqueueMany(t *testing.T, s readpast.Store, ps []readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	var out []*readpast.Job
	for len(ps) > 0 {
		n := min(1000, len(ps))
		out = append(out, enqueue(t, s, ps[:n]...)...)
		ps = ps[n:]
	}
	return out
}

// testConcurrentExactlyOnce is guarantee 1: Claimers goroutines drain the
// queue; some workers are too slow for their lease, so their jobs are
// rescued and re-claimed while they still run, and their late completions
// must be refused. Some attempts fail and are retried.
func testConcurrentExactlyOnce(t *testing.T, h Harness) {
	s := newStore(t, h)
	ps := make([]readpast.EnqueueParams, h.StressJobs)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", MaxAttempts: 1000, Priority: i % 3}
	}
	jobs := enqueueMany(t, s, ps)
	n := int64(len(jobs))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go readpast.RunRescuer(ctx, s, 20*time.Millisecond, discardLogger())

	var done atomic.Int64
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now()
	for w := range h.Claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			slow := w%8 == 7 // this worker often outlives its leases
			var evs []event
			defer func() { rec.add(evs) }()
			for done.Load() < n && ctx.Err() == nil {
				lease := 10 * time.Second
				if slow {
					lease = 30 * time.Millisecond
				}
				got, ok := claimRecorded(ctx, t, s, w, readpast.ClaimParams{Limit: 1 + rng.IntN(16), Lease: lease}, &evs)
				if !ok {
					return
				}
				if len(got) == 0 {
					continue
				}
				if slow && rng.IntN(2) == 0 {
					time.Sleep(lease + 30*time.Millisecond)
				}
				var cs []readpast.Completion
				for _, j := range got {
					if rng.IntN(20) == 0 { // a failed attempt, retried at once
						inv := time.Now()
						errs, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "flaky"}})
						if err != nil {
							t.Errorf("fail: %v", err)
							return
						}
						evs = append(evs, event{op: "fail", id: j.ID, token: j.Token, worker: w, invoked: inv, returned: time.Now(), accepted: errs[0] == nil})
						continue
					}
					cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
				}
				if len(cs) == 0 {
					continue
				}
				inv := time.Now()
				errs, err := s.Complete(ctx, cs)
				ret := time.Now()
				if err != nil {
					t.Errorf("complete: %v", err)
					return
				}
				for i, c := range cs {
					ok := errs[i] == nil
					if !ok && !errors.Is(errs[i], readpast.ErrStaleToken) {
						t.Errorf("complete job %d: %v", c.ID, errs[i])
					}
					if ok {
						done.Add(1)
					}
					evs = append(evs, event{op: "complete", id: c.ID, token: c.Token, worker: w, invoked: inv, returned: ret, accepted: ok})
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("run did not finish: %d of %d jobs completed", done.Load(), n)
	}
	claims, stale := checkHistory(t, s, jobs, rec.events)
	t.Logf("%d jobs, %d claimers: %d claims, %d stale writes refused, %.0f jobs/s", n, h.Claimers, claims, stale, float64(n)/elapsed.Seconds())
	if stale == 0 {
		t.Errorf("no stale write happened: the slow workers did not exercise fencing")
	}
	if int64(claims) == n {
		t.Errorf("no job was claimed twice: lease expiry was not exercised")
	}
}

// testConcurrentGroups is guarantee 5: many groups, many claimers. No two
// jobs of a group run at once, each group runs oldest first, and ungrouped
// jobs flow alongside. Groups span two queues that claimers take in
// different combinations, and while they claim, an enqueuer keeps adding
// higher-priority jobs to busy groups: a new group head that a claimer with
// an older snapshot cannot see is exactly when a group-free decision taken
// on stale data would double-book the group.
func testConcurrentGroups(t *testing.T, h Harness) {
	s := newStore(t, h)
	const groups = 40
	queues := []string{"qa", "qb"}
	ps := make([]readpast.EnqueueParams, h.StressJobs)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: queues[i%2]}
		if i%4 != 0 {
			ps[i].Group = fmt.Sprint("g", (i/4)%groups)
		}
	}
	jobs := enqueueMany(t, s, ps)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// Late, urgent jobs, enqueued during the run.
	lateN := h.StressJobs / 10
	lateDone := make(chan []*readpast.Job, 1)
	go func() {
		rng := rand.New(rand.NewPCG(9, 9))
		var late []*readpast.Job
		defer func() { lateDone <- late }()
		for len(late) < lateN && ctx.Err() == nil {
			batch := make([]readpast.EnqueueParams, min(1+rng.IntN(4), lateN-len(late)))
			for i := range batch {
				batch[i] = readpast.EnqueueParams{Kind: "late", Queue: queues[rng.IntN(2)], Group: fmt.Sprint("g", rng.IntN(groups)), Priority: -1 - rng.IntN(5)}
			}
			got, err := s.Enqueue(ctx, batch)
			if err != nil {
				t.Errorf("late enqueue: %v", err)
				return
			}
			late = append(late, got...)
			time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		}
	}()

	var done atomic.Int64
	var lateAll atomic.Bool
	var rec recorder
	var wg sync.WaitGroup
	start := time.Now()
	total := func() int64 { return int64(len(jobs) + lateN) }
	for w := range h.Claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			mine := [][]string{{"qa"}, {"qb"}, {"qa", "qb"}}[w%3]
			var evs []event
			defer func() { rec.add(evs) }()
			for (done.Load() < total() || !lateAll.Load()) && ctx.Err() == nil {
				got, ok := claimRecorded(ctx, t, s, w, readpast.ClaimParams{Queues: mine, Limit: 1 + rng.IntN(8), Lease: time.Minute}, &evs)
				if !ok {
					return
				}
				if len(got) == 0 {
					continue
				}
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // work
				}
				var cs []readpast.Completion
				for _, j := range got {
					// Some attempts fail (retried at once) or are released:
					// every way out of running must free the group's slot once.
					switch r := rng.IntN(20); {
					case r == 0:
						inv := time.Now()
						errs, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "flaky"}})
						if err != nil || errs[0] != nil {
							t.Errorf("fail job %d: %v %v", j.ID, err, errs)
							return
						}
						evs = append(evs, event{op: "fail", id: j.ID, token: j.Token, worker: w, invoked: inv, returned: time.Now(), accepted: true})
					case r == 1:
						inv := time.Now()
						if err := s.Release(ctx, j.ID, j.Token); err != nil {
							t.Errorf("release job %d: %v", j.ID, err)
							return
						}
						evs = append(evs, event{op: "release", id: j.ID, token: j.Token, worker: w, invoked: inv, returned: time.Now(), accepted: true})
					default:
						cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
					}
				}
				if len(cs) == 0 {
					continue
				}
				inv := time.Now()
				errs, err := s.Complete(ctx, cs)
				if err != nil {
					t.Errorf("complete: %v", err)
					return
				}
				for i, c := range cs {
					if errs[i] != nil {
						t.Errorf("complete job %d: %v", c.ID, errs[i])
						continue
					}
					done.Add(1)
					evs = append(evs, event{op: "complete", id: c.ID, token: c.Token, worker: w, invoked: inv, returned: time.Now(), accepted: true})
				}
			}
		}()
	}
	late := <-lateDone
	lateAll.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	if ctx.Err() != nil || len(late) != lateN {
		t.Errorf("run did not finish: %d of %d jobs completed, %d of %d late jobs enqueued", done.Load(), total(), len(late), lateN)
		reportUnfinished(t, h, s, append(jobs, late...))
		t.FailNow()
	}
	checkHistory(t, s, append(jobs, late...), rec.events)

	// Per group: executions [claim returned, complete/fail/release invoked]
	// must not overlap. The jobs enqueued up front share priority 0 and start
	// in id order (late jobs may overtake them, never reorder them); a failed
	// job is retried with a new run-at, so it leaves the order check.
	type run struct {
		id         int64
		prio       int
		start, end time.Time
	}
	type run0 struct {
		id    int64
		token string
	}
	ends := map[run0]time.Time{} // a run ends when its own complete/fail/release is invoked
	failed := map[int64]bool{}
	for _, e := range rec.events {
		if e.op != "claim" {
			ends[run0{e.id, e.token}] = e.invoked
		}
		if e.op == "fail" {
			failed[e.id] = true
		}
	}
	perGroup := map[string][]run{}
	for _, e := range rec.events {
		if e.op == "claim" && e.group != "" {
			perGroup[e.group] = append(perGroup[e.group], run{e.id, e.prio, e.returned, ends[run0{e.id, e.token}]})
		}
	}
	overlaps, inversions := 0, 0
	for g, runs := range perGroup {
		sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
		var lastFront int64
		for i, b := range runs {
			if i > 0 {
				if a := runs[i-1]; !b.start.After(a.end) {
					overlaps++
					t.Errorf("group %s: job %d started at %v while job %d ran until %v", g, b.id, b.start.Format(time.StampMicro), a.id, a.end.Format(time.StampMicro))
				}
			}
			if b.prio == 0 && !failed[b.id] {
				if b.id < lastFront {
					inversions++
					t.Errorf("group %s: job %d ran before older job %d", g, lastFront, b.id)
				}
				lastFront = b.id
			}
		}
	}
	if len(perGroup) != groups {
		t.Fatalf("%d groups ran, want %d", len(perGroup), groups)
	}
	// Every slot came back exactly once: with two new jobs per group, one
	// claim takes exactly one job of each group.
	var more []readpast.EnqueueParams
	for g := range groups {
		for range 2 {
			more = append(more, readpast.EnqueueParams{Kind: "k", Queue: "qa", Group: fmt.Sprint("g", g)})
		}
	}
	enqueue(t, s, more...)
	got, err := s.Claim(ctx, readpast.ClaimParams{Queues: queues, Worker: "check", Limit: 1000, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	perGroupNow := map[string]int{}
	for _, j := range got {
		perGroupNow[*j.Group]++
	}
	if len(got) != groups || len(perGroupNow) != groups {
		t.Fatalf("after the run one claim took %d jobs from %d groups, want one from each of %d: group slots drifted", len(got), len(perGroupNow), groups)
	}
	t.Logf("%d jobs in %d groups + ungrouped (%d enqueued during the run), %d claimers: %d overlaps, %d FIFO inversions, %.0f jobs/s",
		total(), groups, lateN, h.Claimers, overlaps, inversions, float64(total())/elapsed.Seconds())
}

// reportUnfinished logs the jobs of a run that did not finish, as stored
// now, and the state of their groups: what a stuck run left behind.
func reportUnfinished(t *testing.T, h Harness, s readpast.Store, jobs []*readpast.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stuck := map[string]bool{}
	n := 0
	for _, j := range jobs {
		got, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Logf("job %d: %v", j.ID, err)
			continue
		}
		if got.State == readpast.StateSucceeded {
			continue
		}
		if n++; n <= 20 {
			t.Logf("unfinished: job %d queue %s group %v state %s attempt %d run_at %s lease %v priority %d", got.ID, got.Queue, groupName(got.Group), got.State, got.Attempt, got.RunAt.Format(time.RFC3339Nano), got.LeaseExpiresAt, got.Priority)
		}
		if got.Group != nil {
			stuck[*got.Group] = true
		}
	}
	t.Logf("%d jobs unfinished", n)
	groups, err := h.Groups(ctx, s)
	if err != nil {
		t.Logf("groups: %v", err)
		return
	}
	for _, g := range groups {
		if stuck[g.Group] {
			t.Logf("group of an unfinished job: %+v", g)
		}
	}
}

// groupName is a job's group for a log line.
func groupName(g *string) string {
	if g == nil {
		return "-"
	}
	return *g
}
