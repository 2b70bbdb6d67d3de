package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testKeysWaitersWake: a job held back because a later key is full
// starts once that key frees a slot, whatever ends the attempt that held
// it: complete, fail (retried later or for good), release, snooze,
// cancel, bulk cancel, or a rescue of its expired lease (back to pending
// or failed for good). Each exit frees the slot on every key of the job.
func testKeysWaitersWake(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 1})
	const short = 200 * time.Millisecond
	cancel := func(j *readpast.Job) error { _, err := s.Cancel(ctx, j.ID); return err }
	ways := []struct {
		name     string
		lease    time.Duration
		attempts int
		exit     func(j *readpast.Job) error
	}{
		{"complete", time.Minute, 0, func(j *readpast.Job) error { return completeOne(ctx, s, j, "") }},
		{"fail-retry", time.Minute, 0, func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now().Add(time.Hour)})
		}},
		{"fail-discard", time.Minute, 0, func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", Discard: true})
		}},
		{"fail-last-attempt", time.Minute, 1, func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x"})
		}},
		{"release", time.Minute, 0, func(j *readpast.Job) error {
			if err := s.Release(ctx, j.ID, j.Token); err != nil {
				return err
			}
			return cancel(j) // pending again: out of the way
		}},
		{"snooze", time.Minute, 0, func(j *readpast.Job) error { return s.Snooze(ctx, j.ID, j.Token, time.Hour) }},
		{"cancel", time.Minute, 0, cancel},
		{"bulk-cancel", time.Minute, 0, func(j *readpast.Job) error {
			n, err := s.BulkCancel(ctx, readpast.JobFilter{Kind: j.Kind})
			if err == nil && n != 1 {
				err = fmt.Errorf("BulkCancel cancelled %d, want 1", n)
			}
			return err
		}},
		{"expire", short, 0, func(j *readpast.Job) error {
			time.Sleep(time.Until(*j.LeaseExpiresAt) + 20*time.Millisecond)
			if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
				return fmt.Errorf("RescueExpired = %d, %v; want 1", n, err)
			}
			if got := get(t, s, j.ID); got.State != readpast.StatePending {
				return fmt.Errorf("rescued job is %s, want pending", got.State)
			}
			return cancel(j)
		}},
		{"expire-last-attempt", short, 1, func(j *readpast.Job) error {
			time.Sleep(time.Until(*j.LeaseExpiresAt) + 20*time.Millisecond)
			if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
				return fmt.Errorf("RescueExpired = %d, %v; want 1", n, err)
			}
			return nil
		}},
	}
	for _, w := range ways {
		first := "w:" + w.name
		js := enqueue(t, s,
			readpast.EnqueueParams{Kind: "run-" + w.name, Keys: []string{first + ":run", "api"}, MaxAttempts: w.attempts},
			kj(first+":wait", "api"))
		c := claim(t, s, 10, w.lease)
		wantIDs(t, w.name+": first claim (api runs one)", c, js[0])
		wantIDs(t, w.name+": with api full", claim(t, s, 10, time.Minute))
		wantRunning(t, s, w.name+": running", "w:*", first+":run", 1)
		if err := w.exit(c[0]); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		wantRunning(t, s, w.name+": after the exit", "api", "api", 0)
		wantRunning(t, s, w.name+": after the exit", "w:*", first+":run", 0)
		next := claim(t, s, 10, time.Minute)
		wantIDs(t, w.name+": after the running job's exit (the waiting job's key was not woken)", next, js[1])
		wantRunning(t, s, w.name+": the waiting job started", "api", "api", 1)
		if err := cancel(next[0]); err != nil {
			t.Fatal(err)
		}
		wantRunning(t, s, w.name+": after the waiting job was cancelled", "api", "api", 0)
	}
	wantRunning(t, s, "at the end", "api", "api", 0)
}

// testKeysStaleTokenFreesNothing: once a rescue ended an attempt (and
// freed its keys) and a claim started the job again, the old attempt's
// writes change nothing: the new attempt keeps its slots, and a job
// waiting for them waits until the new attempt ends. Completing twice
// frees once.
func testKeysStaleTokenFreesNothing(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "s:*", Concurrency: 5})
	j := enqueue(t, s, kj("s:1", "api"))[0]
	const lease = 150 * time.Millisecond
	old := claim(t, s, 10, lease)
	wantIDs(t, "first claim", old, j)
	expire(t, s, lease)
	wantRunning(t, s, "after the rescue", "api", "api", 0)
	cur := claim(t, s, 10, time.Minute)
	wantIDs(t, "the rescued job again", cur, j)
	if cur[0].Token == old[0].Token || cur[0].Attempt != 2 {
		t.Fatalf("re-claim: attempt %d, token unchanged %v", cur[0].Attempt, cur[0].Token == old[0].Token)
	}
	wait := enqueue(t, s, kj("s:2", "api"))[0]
	stale := map[string]error{
		"complete": completeOne(ctx, s, old[0], ""),
		"fail":     failOne(ctx, s, readpast.Failure{ID: j.ID, Token: old[0].Token, Message: "old", Discard: true}),
		"release":  s.Release(ctx, j.ID, old[0].Token),
		"snooze":   s.Snooze(ctx, j.ID, old[0].Token, time.Hour),
	}
	for op, err := range stale {
		if !errors.Is(err, readpast.ErrStaleToken) {
			t.Fatalf("%s with the old attempt's token = %v, want ErrStaleToken", op, err)
		}
	}
	wantRunning(t, s, "after the stale writes", "api", "api", 1)
	wantRunning(t, s, "after the stale writes", "s:*", "s:1", 1)
	wantIDs(t, "after the stale writes (api's slot is the new attempt's)", claim(t, s, 10, time.Minute))
	mustComplete(t, s, cur[0])
	mustComplete(t, s, cur[0]) // again, with the same token: nothing changes
	wantRunning(t, s, "after the completion", "s:*", "s:1", 0)
	next := claim(t, s, 10, time.Minute)
	wantIDs(t, "after the new attempt completed", next, wait)
	mustComplete(t, s, cur[0])
	if _, err := s.Cancel(ctx, j.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("cancel of a finished job = %v, want ErrInvalidState", err)
	}
	wantRunning(t, s, "with one job of api running, after repeated completions of another", "api", "api", 1)
	wantRunning(t, s, "after repeated completions", "s:*", "s:1", 0)
}

// testKeysLimitRaisedWakes: raising the limit of a full later key (its
// own, or the template that governs it) lets the jobs waiting for it
// start at once, up to the new limit.
func testKeysLimitRaisedWakes(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 1})
	js := enqueue(t, s, kj("c:1", "api"), kj("c:2", "api"), kj("c:3", "api"), kj("d:1", "t:x"), kj("d:2", "t:x"))
	wantSet(t, "first claim (api and t:x run one each)", claim(t, s, 10, time.Minute), js[0], js[3])
	wantIDs(t, "with api and t:x full", claim(t, s, 10, time.Minute))
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 2})
	wantIDs(t, "after api's concurrency went up to 2", claim(t, s, 10, time.Minute), js[1])
	wantRunning(t, s, "after api's concurrency went up to 2", "api", "api", 2)
	wantIDs(t, "with api full at 2", claim(t, s, 10, time.Minute))
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 3})
	wantIDs(t, "after t:*'s concurrency went up to 3", claim(t, s, 10, time.Minute), js[4])
	wantRunning(t, s, "after t:*'s concurrency went up", "t:*", "t:x", 2)
	// A limit declared for a key that had none (the default, 1).
	more := enqueue(t, s, kj("e:1", "plain"), kj("e:2", "plain"))
	wantIDs(t, "plain runs one by default", claim(t, s, 10, time.Minute), more[0])
	putLimit(t, s, readpast.Limit{Key: "plain", Concurrency: 2})
	wantIDs(t, "after plain's limit was declared", claim(t, s, 10, time.Minute), more[1])
}

// testKeysConcurrentClaims: claimers race over jobs whose first keys are
// twenty f:* keys (2 at once each) and that name up to two of three
// shared s:* keys (2 at once each) later, some of them an s:* key first.
// Counting on the test side (from a claim's return to before its
// completion, a span within the store's), no key ever runs more than its
// limit; every job runs exactly once; none is left waiting for a key
// that freed a slot without waking it.
func testKeysConcurrentClaims(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	const (
		firsts, shared, total, claimers, limit = 20, 3, 400, 8, 2
		stall                                  = 5 * time.Second
	)
	putLimit(t, s, readpast.Limit{Key: "f:*", Concurrency: limit})
	putLimit(t, s, readpast.Limit{Key: "s:*", Concurrency: limit})
	rng := rand.New(rand.NewPCG(11, 13))
	ps := make([]readpast.EnqueueParams, total)
	for i := range ps {
		keys := []string{fmt.Sprint("f:", rng.IntN(firsts))}
		if rng.IntN(10) == 0 {
			keys[0] = fmt.Sprint("s:", rng.IntN(shared))
		}
		for _, k := range rng.Perm(shared)[:rng.IntN(3)] {
			if k := fmt.Sprint("s:", k); k != keys[0] {
				keys = append(keys, k)
			}
		}
		ps[i] = readpast.EnqueueParams{Kind: "k", Keys: keys, Priority: rng.IntN(3) - 1}
	}
	jobs := enqueueMany(t, s, ps)
	keysOf := map[int64][]string{}
	for i, j := range jobs {
		keysOf[j.ID] = ps[i].Keys
	}
	var (
		mu       sync.Mutex
		running  = map[string]int{}
		runs     = map[int64]int{}
		done     atomic.Int64
		progress atomic.Int64 // UnixNano of the last claim that took jobs
		stalled  atomic.Bool
		over     atomic.Bool // a key ran over its limit: stop
		wg       sync.WaitGroup
	)
	progress.Store(time.Now().UnixNano())
	deadline := time.Now().Add(time.Minute)
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 17))
			for done.Load() < total && !stalled.Load() && !over.Load() && time.Now().Before(deadline) {
				if time.Since(time.Unix(0, progress.Load())) > stall {
					stalled.Store(true)
					return
				}
				c, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", w), Limit: 1 + rng.IntN(4), Lease: time.Minute})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(c) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				progress.Store(time.Now().UnixNano())
				mu.Lock()
				for _, j := range c {
					runs[j.ID]++
					if j.Attempt != 1 {
						t.Errorf("job %d started with attempt %d", j.ID, j.Attempt)
					}
					for _, k := range keysOf[j.ID] {
						if running[k]++; running[k] > limit && over.CompareAndSwap(false, true) {
							t.Errorf("key %s runs %d jobs at once (limit %d) once job %d (keys %q) started", k, running[k], limit, j.ID, keysOf[j.ID])
						}
					}
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
				for _, j := range c {
					mu.Lock()
					for _, k := range keysOf[j.ID] {
						running[k]--
					}
					mu.Unlock()
					if err := completeOne(ctx, s, j, ""); err != nil {
						t.Errorf("complete job %d: %v", j.ID, err)
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := done.Load(); n != total {
		var left []string
		for _, j := range jobs {
			if runs[j.ID] == 0 && len(left) < 10 {
				g := get(t, s, j.ID)
				left = append(left, fmt.Sprintf("job %d (keys %q) %s", j.ID, keysOf[j.ID], g.State))
			}
		}
		why := "the run took over a minute"
		if stalled.Load() {
			why = fmt.Sprintf("no claim took a job for %s", stall)
		}
		t.Fatalf("%d of %d jobs done: %s though jobs were left, waiting for keys that all had free slots (nothing was running); first left: %s\nkey states: %s",
			n, total, why, strings.Join(left, "; "), keyStates(t, s, "f:*", "s:*"))
	}
	for _, j := range jobs {
		if runs[j.ID] != 1 {
			t.Fatalf("job %d ran %d times", j.ID, runs[j.ID])
		}
	}
	if got := len(listAll(t, s, readpast.ListParams{State: readpast.StateSucceeded})); got != total {
		t.Fatalf("%d jobs succeeded, want %d", got, total)
	}
	for _, l := range []string{"f:*", "s:*"} {
		for _, k := range ok(s.GetLimit(ctx, l)).must(t).Keys {
			if k.Running != 0 {
				t.Fatalf("key %s counts %d running with every job done", k.Key, k.Running)
			}
		}
	}
}

// keyStates describes the keys the limits govern, for a failure message.
func keyStates(t *testing.T, s readpast.Store, limits ...string) string {
	t.Helper()
	var out []string
	for _, l := range limits {
		for _, k := range ok(s.GetLimit(ctxT(t), l)).must(t).Keys {
			out = append(out, fmt.Sprintf("%s running %d/%d", k.Key, k.Running, k.Concurrency))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
