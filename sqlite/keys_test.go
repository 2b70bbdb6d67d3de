package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Jobs with several keys (keys.go), on the rows the store keeps: the
// later keys' running counts and waiters, and the first keys' ready
// marks. storetest's Keys* tests check the same behaviour through the
// API alone.

// keysClock is a store's clock that a test moves on.
type keysClock struct{ off atomic.Int64 }

func (c *keysClock) now() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *keysClock) add(d time.Duration) { c.off.Add(int64(d)) }

// openKeys opens a store on a new file, on a clock the test moves.
func openKeys(t *testing.T) (*Store, *keysClock) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "keys.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := &keysClock{}
	s.now = c.now
	return s, c
}

// kjob is a job of kind "k" with keys.
func kjob(keys ...string) readpast.EnqueueParams {
	return readpast.EnqueueParams{Kind: "k", Keys: keys}
}

func keysPut(t *testing.T, s *Store, ls ...readpast.Limit) {
	t.Helper()
	for _, l := range ls {
		if _, err := s.PutLimit(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
}

func keysEnqueue(t *testing.T, s *Store, ps ...readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	js, err := s.Enqueue(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func keysClaim(t *testing.T, s *Store, limit int, lease time.Duration) []*readpast.Job {
	t.Helper()
	js, err := s.Claim(context.Background(), readpast.ClaimParams{Worker: "w", Limit: limit, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func keysComplete(t *testing.T, s *Store, js ...*readpast.Job) {
	t.Helper()
	cs := make([]readpast.Completion, len(js))
	for i, j := range js {
		cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
	}
	res, err := s.Complete(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range res {
		if e != nil {
			t.Fatalf("complete job %d: %v", js[i].ID, e)
		}
	}
}

// jobIDs lists the ids of js.
func jobIDs(js []*readpast.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// wantJobs fails unless got are exactly the jobs want, in that order.
func wantJobs(t *testing.T, what string, got []*readpast.Job, want ...*readpast.Job) {
	t.Helper()
	if !slices.Equal(jobIDs(got), jobIDs(want)) {
		t.Fatalf("%s: claimed %v, want %v", what, jobIDs(got), jobIDs(want))
	}
}

// keyRowState is a key's row: whether there is one, its running count,
// its waiters (sorted) and its bucket's tat.
type keyRowState struct {
	exists  bool
	running int
	waiters []string
	tat     sql.NullInt64
}

func keyRowOf(t *testing.T, s *Store, key string) keyRowState {
	t.Helper()
	var (
		st keyRowState
		ws sql.NullString
	)
	err := s.DB().QueryRow(`SELECT running, waiters, tat FROM readpast_groups WHERE group_key = ?1`, key).Scan(&st.running, &ws, &st.tat)
	if errors.Is(err, sql.ErrNoRows) {
		return st
	}
	if err != nil {
		t.Fatal(err)
	}
	st.exists = true
	if ws.Valid {
		if err := json.Unmarshal([]byte(ws.String), &st.waiters); err != nil {
			t.Fatalf("key %s: waiters %q: %v", key, ws.String, err)
		}
		slices.Sort(st.waiters)
	}
	return st
}

// wantKeyRunning fails unless key counts n running (no row: 0).
func wantKeyRunning(t *testing.T, s *Store, what, key string, n int) {
	t.Helper()
	if got := keyRowOf(t, s, key).running; got != n {
		t.Fatalf("%s: key %s counts %d running, want %d", what, key, got, n)
	}
}

// wantWaiters fails unless key's row keeps exactly waiters.
func wantWaiters(t *testing.T, s *Store, what, key string, waiters ...string) {
	t.Helper()
	got := keyRowOf(t, s, key).waiters
	slices.Sort(waiters)
	if !slices.Equal(got, waiters) {
		t.Fatalf("%s: key %s has waiters %q, want %q", what, key, got, waiters)
	}
}

// marksOf returns the run_at (Unix µs) of group's ready marks, in order.
func marksOf(t *testing.T, s *Store, group string) []int64 {
	t.Helper()
	rows, err := s.DB().Query(`SELECT run_at FROM readpast_group_ready WHERE group_key = ?1 ORDER BY run_at`, group)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var at int64
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		out = append(out, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantNoKeyState fails unless no key counts a running job and none keeps
// a waiter.
func wantNoKeyState(t *testing.T, s *Store, what string) {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_groups WHERE running <> 0 OR waiters IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		var rows []string
		r, err := s.DB().Query(`SELECT group_key, running, coalesce(waiters, '') FROM readpast_groups WHERE running <> 0 OR waiters IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var (
				k, w string
				n    int
			)
			if err := r.Scan(&k, &n, &w); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, fmt.Sprintf("%s running %d waiters %s", k, n, w))
		}
		r.Close()
		t.Fatalf("%s: %s", what, strings.Join(rows, "; "))
	}
}

// A later key of one slot shared by the jobs of several first keys runs
// one of them at a time. The first keys it holds back wait for it
// without a ready mark (a claim does not read them again in vain), each
// kept among its waiters; each completion marks them, and the next in
// claim order starts. A job that does not name the key is not held back.
func TestKeysLaterKeyOfOneSlotRunsOneJobAtATime(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 1}, readpast.Limit{Key: "c:*", Concurrency: 10})
	js := keysEnqueue(t, s, kjob("c:1", "api"), kjob("c:2", "api"), kjob("c:3", "api"))
	running := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "first claim", running, js[0])
	wantKeyRunning(t, s, "first claim", "api", 1)
	wantWaiters(t, s, "first claim", "api", "c:2", "c:3")
	for _, k := range []string{"c:2", "c:3"} {
		if m := marksOf(t, s, k); len(m) != 0 {
			t.Fatalf("key %s, held back by the full api, has marks %v: claims would read it in vain", k, m)
		}
	}
	wantJobs(t, "again with api full", keysClaim(t, s, 10, time.Minute))

	more := keysEnqueue(t, s, kjob("c:4"), kjob("c:4", "api"))
	c4 := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "a job of c:4 not naming api", c4, more[0])
	wantWaiters(t, s, "with c:4 held back too", "api", "c:2", "c:3", "c:4")
	wantKeyRunning(t, s, "with c:4 running one", "c:4", 1)

	for _, next := range []*readpast.Job{js[1], js[2], more[1]} {
		keysComplete(t, s, running...)
		wantWaiters(t, s, "after a completion", "api")
		running = keysClaim(t, s, 10, time.Minute)
		wantJobs(t, fmt.Sprintf("after job %d completed", next.ID-1), running, next)
		wantKeyRunning(t, s, "after the next started", "api", 1)
		if len(running[0].Keys) != 2 || running[0].Keys[1] != "api" {
			t.Fatalf("claimed job %d has keys %q", running[0].ID, running[0].Keys)
		}
	}
	keysComplete(t, s, running[0])
	keysComplete(t, s, c4...)
	wantNoKeyState(t, s, "with every job done")
	var marks int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_group_ready`).Scan(&marks); err != nil || marks != 0 {
		t.Fatalf("%d ready marks left with nothing pending (%v)", marks, err)
	}
}

// Whatever ends the attempt of a job that fills a later key (complete,
// complete in the caller's transaction, fail for a retry or for good,
// release, snooze, cancel, bulk cancel, a rescue of its expired lease
// back to pending or failed for good) frees a slot on every key of the
// job and marks the first key that waited for it, whose job then starts.
func TestKeysWaitersStartAfterEveryFinisher(t *testing.T) {
	s, clock := openKeys(t)
	ctx := context.Background()
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 1}, readpast.Limit{Key: "w:*", Concurrency: 1})
	cancel := func(j *readpast.Job) error { _, err := s.Cancel(ctx, j.ID); return err }
	failOne := func(f readpast.Failure) error {
		res, err := s.Fail(ctx, []readpast.Failure{f})
		if err != nil {
			return err
		}
		return res[0]
	}
	rescue := func(j *readpast.Job) error {
		clock.add(time.Until(j.LeaseExpiresAt.Add(-time.Duration(clock.off.Load()))) + time.Second)
		if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
			return fmt.Errorf("RescueExpired = %d, %v; want 1", n, err)
		}
		return nil
	}
	ways := []struct {
		name     string
		lease    time.Duration
		attempts int
		exit     func(j *readpast.Job) error
	}{
		{"complete", time.Minute, 0, func(j *readpast.Job) error {
			res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
			if err != nil {
				return err
			}
			return res[0]
		}},
		{"complete-in-tx", time.Minute, 0, func(j *readpast.Job) error {
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token}); err != nil {
				return err
			}
			return tx.Commit()
		}},
		{"fail-retry-later", time.Minute, 0, func(j *readpast.Job) error {
			return failOne(readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: clock.now().Add(time.Hour)})
		}},
		{"fail-discard", time.Minute, 0, func(j *readpast.Job) error {
			return failOne(readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", Discard: true})
		}},
		{"fail-last-attempt", time.Minute, 1, func(j *readpast.Job) error {
			return failOne(readpast.Failure{ID: j.ID, Token: j.Token, Message: "x"})
		}},
		{"release", time.Minute, 0, func(j *readpast.Job) error {
			if err := s.Release(ctx, j.ID, j.Token); err != nil {
				return err
			}
			return cancel(j) // pending again, before the waiting job in claim order
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
		{"rescue", time.Second, 0, func(j *readpast.Job) error {
			if err := rescue(j); err != nil {
				return err
			}
			return cancel(j) // pending again
		}},
		{"rescue-last-attempt", time.Second, 1, rescue},
	}
	for _, w := range ways {
		run, wait := "w:"+w.name+":run", "w:"+w.name+":wait"
		js := keysEnqueue(t, s,
			readpast.EnqueueParams{Kind: "run-" + w.name, Keys: []string{run, "api"}, MaxAttempts: w.attempts},
			kjob(wait, "api"))
		c := keysClaim(t, s, 10, w.lease)
		wantJobs(t, w.name+": first claim", c, js[0])
		wantJobs(t, w.name+": with api full", keysClaim(t, s, 10, time.Minute))
		wantWaiters(t, s, w.name+": with api full", "api", wait)
		if m := marksOf(t, s, wait); len(m) != 0 {
			t.Fatalf("%s: the waiting key has marks %v", w.name, m)
		}
		if err := w.exit(c[0]); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		wantKeyRunning(t, s, w.name+": after the exit", "api", 0)
		wantKeyRunning(t, s, w.name+": after the exit", run, 0)
		wantWaiters(t, s, w.name+": after the exit", "api")
		if m := marksOf(t, s, wait); len(m) != 1 || m[0] > micros(clock.now()) {
			t.Fatalf("%s: after the exit the waiting key has marks %v, want one due now", w.name, m)
		}
		next := keysClaim(t, s, 10, time.Minute)
		wantJobs(t, w.name+": after the exit", next, js[1])
		wantKeyRunning(t, s, w.name+": the waiting job started", "api", 1)
		keysComplete(t, s, next...)
	}
	wantNoKeyState(t, s, "at the end")
}

// A write with the token of an attempt a rescue ended frees nothing: the
// new attempt keeps its slot on every key, and the job waiting for it
// waits until that attempt ends. Completing twice frees once.
func TestKeysStaleTokenFreesNothing(t *testing.T) {
	s, clock := openKeys(t)
	ctx := context.Background()
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 1}, readpast.Limit{Key: "s:*", Concurrency: 5})
	j := keysEnqueue(t, s, kjob("s:1", "api"))[0]
	old := keysClaim(t, s, 10, time.Second)
	wantJobs(t, "first claim", old, j)
	clock.add(2 * time.Second)
	if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("RescueExpired = %d, %v", n, err)
	}
	wantKeyRunning(t, s, "after the rescue", "api", 0)
	cur := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "the rescued job again", cur, j)
	wait := keysEnqueue(t, s, kjob("s:2", "api"))[0]
	wantJobs(t, "with api full", keysClaim(t, s, 10, time.Minute))

	res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: old[0].Token}})
	if err != nil || !errors.Is(res[0], readpast.ErrStaleToken) {
		t.Fatalf("stale complete: %v, %v", res, err)
	}
	fres, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: old[0].Token, Message: "old", Discard: true}})
	if err != nil || !errors.Is(fres[0], readpast.ErrStaleToken) {
		t.Fatalf("stale fail: %v, %v", fres, err)
	}
	if err := s.Release(ctx, j.ID, old[0].Token); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale release: %v", err)
	}
	if err := s.Snooze(ctx, j.ID, old[0].Token, time.Hour); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale snooze: %v", err)
	}
	wantKeyRunning(t, s, "after the stale writes", "api", 1)
	wantKeyRunning(t, s, "after the stale writes", "s:1", 1)
	wantWaiters(t, s, "after the stale writes", "api", "s:2")
	if m := marksOf(t, s, "s:2"); len(m) != 0 {
		t.Fatalf("stale writes marked the waiting key: %v", m)
	}
	wantJobs(t, "after the stale writes", keysClaim(t, s, 10, time.Minute))

	keysComplete(t, s, cur...)
	wantKeyRunning(t, s, "after the completion", "api", 0)
	next := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "after the new attempt completed", next, wait)
	keysComplete(t, s, cur...) // again: an idempotent repeat frees nothing
	wantKeyRunning(t, s, "after a repeated completion", "api", 1)
	wantKeyRunning(t, s, "after a repeated completion", "s:2", 1)
	keysComplete(t, s, next...)
	wantNoKeyState(t, s, "at the end")
}

// A later key with a rate spends one token for each job that starts
// naming it (its bucket's tat moves on one interval a start). The first
// keys of the jobs it holds back are marked at its next start, and wait
// for no slot (it is not full).
func TestKeysRateLimitedLaterKeySpendsATokenPerStart(t *testing.T) {
	s, clock := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 3}, readpast.Limit{Key: "r:*", Concurrency: 5})
	js := keysEnqueue(t, s, kjob("r:1", "api"), kjob("r:2", "api"), kjob("r:3", "api"), kjob("r:4", "api"), kjob("r:5", "api"),
		readpast.EnqueueParams{Kind: "k"})
	c := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "first claim (api's burst of 3, and the job without keys)", c, js[0], js[1], js[2], js[5])
	t0 := micros(*c[0].StartedAt)
	hour := time.Hour.Microseconds()
	api := keyRowOf(t, s, "api")
	if api.running != 3 || api.tat.Int64 != t0+3*hour || len(api.waiters) != 0 {
		t.Fatalf("api after 3 starts: %+v, want running 3, tat %d (3 intervals on), no waiters", api, t0+3*hour)
	}
	for _, k := range []string{"r:4", "r:5"} {
		if m := marksOf(t, s, k); len(m) != 1 || m[0] != t0+hour {
			t.Fatalf("key %s held back by api's rate has marks %v, want one at api's next start %d", k, m, t0+hour)
		}
	}
	wantJobs(t, "with api out of tokens", keysClaim(t, s, 10, time.Minute))
	keysComplete(t, s, c...)
	wantKeyRunning(t, s, "after the completions", "api", 0)
	wantJobs(t, "after the completions (api's rate, not its slots, holds them)", keysClaim(t, s, 10, time.Minute))

	clock.add(time.Hour)
	c = keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "an interval later", c, js[3])
	if api := keyRowOf(t, s, "api"); api.running != 1 || api.tat.Int64 != t0+4*hour {
		t.Fatalf("api after a 4th start: %+v, want running 1, tat %d", api, t0+4*hour)
	}
	if m := marksOf(t, s, "r:5"); len(m) != 1 || m[0] != t0+2*hour {
		t.Fatalf("r:5 has marks %v, want one at api's next start %d", m, t0+2*hour)
	}
	keysComplete(t, s, c...)
	wantNoKeyState(t, s, "at the end")
}

// Raising the limit of a full later key (its own, or its template's)
// marks the first keys that waited for it: their jobs start at once, up
// to the new limit.
func TestKeysRaisedLimitMarksWaiters(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 1}, readpast.Limit{Key: "t:*", Concurrency: 1},
		readpast.Limit{Key: "c:*", Concurrency: 5})
	js := keysEnqueue(t, s, kjob("c:1", "api"), kjob("c:2", "api"), kjob("c:3", "api"), kjob("c:4", "t:x"), kjob("c:5", "t:x"))
	c := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "first claim", c, js[0], js[3])
	wantWaiters(t, s, "first claim", "api", "c:2", "c:3")
	wantWaiters(t, s, "first claim", "t:x", "c:5")
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 3})
	wantWaiters(t, s, "after api's limit went up", "api")
	for _, k := range []string{"c:2", "c:3"} {
		if m := marksOf(t, s, k); len(m) != 1 {
			t.Fatalf("after api's limit went up, %s has marks %v, want one", k, m)
		}
	}
	more := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "after api's limit went up", more, js[1], js[2])
	keysPut(t, s, readpast.Limit{Key: "t:*", Concurrency: 2})
	wantWaiters(t, s, "after t:*'s limit went up", "t:x")
	last := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "after t:*'s limit went up", last, js[4])
	keysComplete(t, s, append(append(c, more...), last...)...)
	wantNoKeyState(t, s, "at the end")
}

// A head its full later key holds back is one the claim cannot take: it
// counts in no round of its first key, so it pushes none of the key's
// jobs behind it back. a's second job (round 0, as a's first is held)
// goes before b's job enqueued after it.
func TestKeysHeldHeadCountsInNoRound(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "a", Concurrency: 2})
	z := keysEnqueue(t, s, kjob("z", "x"))
	running := keysClaim(t, s, 1, time.Minute)
	wantJobs(t, "x's first job", running, z[0])
	in := func(q string, p readpast.EnqueueParams) readpast.EnqueueParams { p.Queue = q; return p }
	js := keysEnqueue(t, s, in("q1", kjob("a", "x")), in("q1", kjob("a")))
	js = append(js, keysEnqueue(t, s, in("q2", kjob("b")))...)
	// A claim of one over two queues reads a mark in each: a's and b's.
	c, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{"q1", "q2"}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantJobs(t, "a claim of one with x full", c, js[1])
	wantWaiters(t, s, "a claim of one with x full", "x", "a")
	keysComplete(t, s, running...)
	c, err = s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{"q1", "q2"}, Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	wantJobs(t, "after x's job completed", c, js[0], js[2])
}

// wantJobKeys fails unless j's keys are want and its group the first.
func wantJobKeys(t *testing.T, what string, j *readpast.Job, want []string) {
	t.Helper()
	if !slices.Equal(j.Keys, want) || (j.Keys == nil) != (want == nil) {
		t.Fatalf("%s: job %d has keys %#v, want %#v", what, j.ID, j.Keys, want)
	}
	if len(want) > 0 && (j.Group == nil || *j.Group != want[0]) || len(want) == 0 && j.Group != nil {
		t.Fatalf("%s: job %d has group %v with keys %q", what, j.ID, j.Group, want)
	}
}

// Job.Keys comes back from every read: Enqueue's answer, Get, List,
// Claim, and the finished job; a group alone is one key; no keys is nil.
// A flow's blocked job that its parent's failure cancels (the trigger's
// cascade) keeps them in history too.
func TestKeysRoundTrip(t *testing.T) {
	s, _ := openKeys(t)
	ctx := context.Background()
	want := [][]string{{"a", "b", "c", "d"}, {"g"}, nil}
	js := keysEnqueue(t, s, kjob("a", "b", "c", "d"), readpast.EnqueueParams{Kind: "k", Group: "g"}, readpast.EnqueueParams{Kind: "k"})
	byID := map[int64][]string{}
	for i, j := range js {
		wantJobKeys(t, "Enqueue", j, want[i])
		byID[j.ID] = want[i]
		got, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantJobKeys(t, "Get", got, want[i])
	}
	check := func(what string, jobs []*readpast.Job) {
		t.Helper()
		if len(jobs) != len(js) {
			t.Fatalf("%s: %d jobs", what, len(jobs))
		}
		for _, j := range jobs {
			wantJobKeys(t, what, j, byID[j.ID])
		}
	}
	l, err := s.List(ctx, readpast.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	check("List", l.Jobs)
	c := keysClaim(t, s, 10, time.Minute)
	check("Claim", c)
	keysComplete(t, s, c...)
	if l, err = s.List(ctx, readpast.ListParams{State: readpast.StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	check("List of finished jobs", l.Jobs)
	wantNoKeyState(t, s, "after the completions")

	f, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Keys: []string{"p1", "p2"}}},
		{Ref: "c", Job: readpast.EnqueueParams{Kind: "c", Keys: []string{"c1", "c2", "c3"}}, After: []readpast.After{{Ref: "p"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantJobKeys(t, "EnqueueFlow (blocked child)", f[1], []string{"c1", "c2", "c3"})
	p := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "the flow's parent", p, f[0])
	if res, err := s.Fail(ctx, []readpast.Failure{{ID: p[0].ID, Token: p[0].Token, Message: "no", Discard: true}}); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	child, err := s.Get(ctx, f[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	if child.State != readpast.StateCancelled {
		t.Fatalf("child is %s, want cancelled by its parent's failure", child.State)
	}
	wantJobKeys(t, "Get of a child the cascade cancelled", child, []string{"c1", "c2", "c3"})
	wantNoKeyState(t, s, "at the end")
}

// Claimers race over jobs of ten first keys that name up to two of three
// shared keys later (some a shared key first), and end each attempt by a
// random finisher: complete, fail (retried at once, failed for good on
// its third attempt), release, snooze, cancel. No key ever counts more
// running than its limit; every job ends; then every key counts 0
// running and keeps no waiter.
func TestKeysRunningCountsReturnToZero(t *testing.T) {
	s, _ := openKeys(t)
	ctx := context.Background()
	const total, workers = 300, 4
	keysPut(t, s, readpast.Limit{Key: "f:*", Concurrency: 3}, readpast.Limit{Key: "s:*", Concurrency: 2})
	rng := rand.New(rand.NewPCG(3, 5))
	ps := make([]readpast.EnqueueParams, total)
	for i := range ps {
		keys := []string{fmt.Sprint("f:", rng.IntN(10))}
		if rng.IntN(10) == 0 {
			keys[0] = fmt.Sprint("s:", rng.IntN(3))
		}
		for _, k := range rng.Perm(3)[:rng.IntN(3)] {
			if k := fmt.Sprint("s:", k); k != keys[0] {
				keys = append(keys, k)
			}
		}
		ps[i] = readpast.EnqueueParams{Kind: "k", Keys: keys, MaxAttempts: 3}
	}
	keysEnqueue(t, s, ps...)
	var (
		done     atomic.Int64
		progress atomic.Int64
		wg       sync.WaitGroup
	)
	progress.Store(time.Now().UnixNano())
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for done.Load() < total && !t.Failed() {
				if time.Since(time.Unix(0, progress.Load())) > 10*time.Second {
					t.Errorf("no claim took a job for 10 s with %d of %d jobs done", done.Load(), total)
					return
				}
				c, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", w), Limit: 1 + rng.IntN(4), Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(c) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				progress.Store(time.Now().UnixNano())
				var over int
				if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM readpast_groups WHERE running > max_running`).Scan(&over); err != nil || over != 0 {
					t.Errorf("%d keys over their limits (%v)", over, err)
					return
				}
				for _, j := range c {
					final := true
					switch r := rng.IntN(10); {
					case r < 5:
						res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
						err = errors.Join(err, res[0])
						if err != nil {
							t.Error(err)
						}
					case r < 7:
						res, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x"}})
						if err = errors.Join(err, res[0]); err != nil {
							t.Error(err)
						}
						final = j.Attempt >= 3
					case r < 8:
						err = s.Release(ctx, j.ID, j.Token)
						final = false
					case r < 9:
						err = s.Snooze(ctx, j.ID, j.Token, 0)
						final = false
					default:
						_, err = s.Cancel(ctx, j.ID)
					}
					if err != nil {
						t.Errorf("job %d: %v", j.ID, err)
						return
					}
					if final {
						done.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n, err := s.Stats(ctx); err != nil {
		t.Fatal(err)
	} else {
		for _, q := range n {
			if (q.State == readpast.StatePending || q.State == readpast.StateRunning) && q.Count != 0 {
				t.Fatalf("queue %s: %d %s left with every job done", q.Queue, q.Count, q.State)
			}
		}
	}
	wantNoKeyState(t, s, "with every job done")
}

// Jobs with one key or none never run the statements of later keys: no
// keyed INSERT, no waiter is kept or taken. Jobs with later keys do (so
// the check would see them).
func TestKeysOneKeyJobsRunNoLaterKeyStatements(t *testing.T) {
	s, _ := openKeys(t)
	ctx := context.Background()
	keysPut(t, s, readpast.Limit{Key: "g", Concurrency: 1})
	keysEnqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "g"}, readpast.EnqueueParams{Kind: "k", Group: "g"},
		readpast.EnqueueParams{Kind: "k"})
	c := keysClaim(t, s, 10, time.Minute)
	if len(c) != 2 {
		t.Fatalf("claimed %v", jobIDs(c))
	}
	keysPut(t, s, readpast.Limit{Key: "g", Concurrency: 2})
	c = append(c, keysClaim(t, s, 10, time.Minute)...)
	keysComplete(t, s, c[0])
	if err := s.Release(ctx, c[1].ID, c[1].Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, c[2].ID); err != nil {
		t.Fatal(err)
	}
	used := func() (keyed, waiters bool) {
		for q := range kept(t, s.write) {
			keyed = keyed || strings.HasPrefix(q, enqueueKeyedInsertSQL)
			waiters = waiters || q == addWaitersSQL || q == clearWaitersSQL
		}
		return keyed, waiters
	}
	if keyed, waiters := used(); keyed || waiters {
		t.Fatalf("jobs with one key or none ran later keys' statements: keyed insert %v, waiters %v", keyed, waiters)
	}
	js := keysEnqueue(t, s, kjob("a", "x"), kjob("b", "x"))
	c = keysClaim(t, s, 10, time.Minute)
	keysComplete(t, s, c...)
	keysComplete(t, s, keysClaim(t, s, 10, time.Minute)...)
	if keyed, waiters := used(); !keyed || !waiters {
		t.Fatalf("jobs %v with later keys: keyed insert %v, waiters %v: the check sees nothing", jobIDs(js), keyed, waiters)
	}
}
