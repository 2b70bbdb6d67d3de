package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Jobs with several keys (EnqueueParams.Keys): the first key is the
// job's stream, as a group; every key it names must allow a start, and
// the job counts as running on each while it runs.

// kj is a job of kind "k" with keys.
func kj(keys ...string) readpast.EnqueueParams {
	return readpast.EnqueueParams{Kind: "k", Keys: keys}
}

// wantKeys checks a job's keys as read by what: want (none for nil), the
// first also its Group.
func wantKeys(t *testing.T, what string, j *readpast.Job, want []string) {
	t.Helper()
	if !slices.Equal(j.Keys, want) {
		t.Fatalf("%s: job %d has keys %q, want %q", what, j.ID, j.Keys, want)
	}
	switch {
	case len(want) == 0 && j.Group != nil:
		t.Fatalf("%s: job %d without keys has group %q", what, j.ID, *j.Group)
	case len(want) > 0 && (j.Group == nil || *j.Group != want[0]):
		t.Fatalf("%s: job %d has group %s, want its first key %q", what, j.ID, groupName(j.Group), want[0])
	}
}

// keyRunning is key's running count as the store keeps it, read from the
// key states of the limit declared as limit (the key itself or the
// template that governs it); 0 for a key that has no row.
func keyRunning(t *testing.T, s readpast.Store, limit, key string) int {
	t.Helper()
	info := ok(s.GetLimit(ctxT(t), limit)).must(t)
	for _, k := range info.Keys {
		if k.Key == key {
			return k.Running
		}
	}
	return 0
}

// wantRunning fails unless key (governed by limit) counts n running.
func wantRunning(t *testing.T, s readpast.Store, what, limit, key string, n int) {
	t.Helper()
	if got := keyRunning(t, s, limit, key); got != n {
		t.Fatalf("%s: key %s counts %d running, want %d", what, key, got, n)
	}
}

// wantIDs fails unless got are exactly the jobs want, in that order.
func wantIDs(t *testing.T, what string, got []*readpast.Job, want ...*readpast.Job) {
	t.Helper()
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("%s: claimed %v, want %v", what, ids(got), ids(want))
	}
}

// wantSet fails unless got are the jobs want, in any order.
func wantSet(t *testing.T, what string, got []*readpast.Job, want ...*readpast.Job) {
	t.Helper()
	g, w := ids(got), ids(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: claimed %v, want %v (in any order)", what, g, w)
	}
}

// testKeysRoundTrip: every read of a job gives its keys, the first its
// group: Enqueue's answer, Get, List, Claim, and the finished job. A
// group alone is one key; a job without keys has none.
func testKeysRoundTrip(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	ps := []readpast.EnqueueParams{
		kj("a", "b", "c", "d"),
		{Kind: "k", Group: "e", Keys: []string{"e", "f"}},
		{Kind: "k", Group: "g"},
		{Kind: "k"},
		kj("h"),
	}
	want := [][]string{{"a", "b", "c", "d"}, {"e", "f"}, {"g"}, nil, {"h"}}
	js := enqueue(t, s, ps...)
	byID := map[int64][]string{}
	for i, j := range js {
		wantKeys(t, "Enqueue's answer", j, want[i])
		byID[j.ID] = want[i]
	}
	check := func(what string, jobs []*readpast.Job) {
		t.Helper()
		if len(jobs) != len(js) {
			t.Fatalf("%s: %d jobs, want %d", what, len(jobs), len(js))
		}
		for _, j := range jobs {
			w, known := byID[j.ID]
			if !known {
				t.Fatalf("%s: unknown job %d", what, j.ID)
			}
			wantKeys(t, what, j, w)
		}
	}
	var got []*readpast.Job
	for _, j := range js {
		got = append(got, get(t, s, j.ID))
	}
	check("Get of a pending job", got)
	check("List of pending jobs", ok(s.List(ctx, readpast.ListParams{})).must(t).Jobs)
	// Every key is distinct: each job is the only one of each of its keys.
	claimed := claim(t, s, 10, time.Minute)
	check("Claim", claimed)
	got = got[:0]
	for _, j := range js {
		got = append(got, wantState(t, s, j.ID, readpast.StateRunning))
	}
	check("Get of a running job", got)
	mustComplete(t, s, claimed...)
	got = got[:0]
	for _, j := range js {
		got = append(got, wantState(t, s, j.ID, readpast.StateSucceeded))
	}
	check("Get of a succeeded job", got)
	check("List of succeeded jobs", ok(s.List(ctx, readpast.ListParams{State: readpast.StateSucceeded})).must(t).Jobs)
}

// testKeysFollowTheJob: the keys follow the job through every way in and
// out of history (cancel, retry, fail for good, bulk retry, bulk cancel,
// a rescue that fails it), and come back from the other ways in: an
// enqueue in the caller's transaction, a unique enqueue and its
// duplicate, a flow's blocked job once its parent succeeded.
func testKeysFollowTheJob(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	keys := []string{"x", "y", "z"}
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "kx", Keys: keys})[0]
	wantKeys(t, "Enqueue's answer", j, keys)
	wantKeys(t, "Cancel's answer", ok(s.Cancel(ctx, j.ID)).must(t), keys)
	wantKeys(t, "Get of a cancelled job", wantState(t, s, j.ID, readpast.StateCancelled), keys)
	wantKeys(t, "Retry's answer", ok(s.Retry(ctx, j.ID)).must(t), keys)
	c := claim(t, s, 10, time.Minute)
	wantIDs(t, "after Retry", c, j)
	wantKeys(t, "Claim of a retried job", c[0], keys)
	if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: c[0].Token, Message: "x", Discard: true}); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "Get of a failed job", wantState(t, s, j.ID, readpast.StateFailed), keys)
	if n := ok(s.BulkRetry(ctx, readpast.JobFilter{Kind: "kx"})).must(t); n != 1 {
		t.Fatalf("BulkRetry retried %d, want 1", n)
	}
	wantKeys(t, "Get of a bulk-retried job", wantState(t, s, j.ID, readpast.StatePending), keys)
	if n := ok(s.BulkCancel(ctx, readpast.JobFilter{Kind: "kx"})).must(t); n != 1 {
		t.Fatalf("BulkCancel cancelled %d, want 1", n)
	}
	wantKeys(t, "Get of a bulk-cancelled job", wantState(t, s, j.ID, readpast.StateCancelled), keys)
	wantIDs(t, "after BulkCancel", claim(t, s, 10, time.Minute))

	// A rescue of an expired lease that fails the job for good.
	one := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Keys: []string{"r1", "r2"}, MaxAttempts: 1})[0]
	const lease = 150 * time.Millisecond
	wantIDs(t, "the job with one attempt", claim(t, s, 10, lease), one)
	expire(t, s, lease)
	wantKeys(t, "Get of a job a rescue failed", wantState(t, s, one.ID, readpast.StateFailed), []string{"r1", "r2"})

	// In the caller's transaction.
	if ts, isTx := s.(readpast.SQLTxStore); isTx && h.BeginSQLTx != nil {
		tx := h.BeginSQLTx(t, s)
		in := ok(ts.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{kj("t1", "t2")})).must(t)
		wantKeys(t, "EnqueueSQLTx's answer", in[0], []string{"t1", "t2"})
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		wantKeys(t, "Get of a job enqueued in a transaction", get(t, s, in[0].ID), []string{"t1", "t2"})
	}

	// A unique enqueue, and the duplicate's answer (the holder).
	u := readpast.EnqueueParams{Kind: "k", Keys: []string{"u1", "u2"}, UniqueKey: "once"}
	held := enqueue(t, s, u)[0]
	wantKeys(t, "a unique enqueue's answer", held, []string{"u1", "u2"})
	dup := enqueue(t, s, u)[0]
	if !dup.Duplicate || dup.ID != held.ID {
		t.Fatalf("second unique enqueue: %+v, want the duplicate of %d", dup, held.ID)
	}
	wantKeys(t, "a duplicate's answer", dup, []string{"u1", "u2"})

	// A flow: the child, blocked, then pending once its parent succeeded.
	fs, isFlow := s.(readpast.FlowStore)
	if !isFlow {
		return
	}
	parent := readpast.FlowJob{Ref: "p", Job: readpast.EnqueueParams{Kind: "kf", Keys: []string{"p1", "p2"}}}
	child := readpast.FlowJob{Ref: "c", Job: readpast.EnqueueParams{Kind: "kf", Keys: []string{"c1", "c2", "c3"}}, After: []readpast.After{{Ref: "p"}}}
	f := flow(t, fs, parent, child)
	wantKeys(t, "EnqueueFlow's answer (parent)", f[0], []string{"p1", "p2"})
	wantKeys(t, "EnqueueFlow's answer (blocked child)", f[1], []string{"c1", "c2", "c3"})
	wantKeys(t, "Get of a blocked job", get(t, s, f[1].ID), []string{"c1", "c2", "c3"})
	// Drain what else is pending (u's holder and the transaction's job).
	var pc *readpast.Job
	for _, c := range claim(t, s, 10, time.Minute) {
		if c.ID == f[0].ID {
			pc = c
		}
		mustComplete(t, s, c)
	}
	if pc == nil {
		t.Fatalf("the flow's parent %d was not claimed", f[0].ID)
	}
	wantKeys(t, "Claim of the flow's parent", pc, []string{"p1", "p2"})
	cc := claim(t, s, 10, time.Minute)
	wantIDs(t, "the child once its parent succeeded", cc, f[1])
	wantKeys(t, "Claim of the flow's child", cc[0], []string{"c1", "c2", "c3"})
}

// testKeysInvalid: more than MaxKeys keys, a key given twice, a bad key,
// a group other than the first key: each refused with a FieldError on
// "keys", and the batch it is in stores nothing.
func testKeysInvalid(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for _, b := range []readpast.EnqueueParams{
		kj("k1", "k2", "k3", "k4", "k5"),
		kj("a", "b", "a"),
		kj("a", "a"),
		kj("a", "has space"),
		kj("a", ""),
		kj("a", strings.Repeat("x", readpast.MaxNameLen+1)),
		{Kind: "k", Group: "x", Keys: []string{"a", "x"}},
		{Kind: "k", Group: "b", Keys: []string{"a"}},
	} {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{kj("fine", "good"), b})
		var fe *readpast.FieldError
		if !errors.Is(err, readpast.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "keys" {
			t.Fatalf("group %q keys %q: %v, want a FieldError for keys", b.Group, b.Keys, err)
		}
	}
	if got := listAll(t, s, readpast.ListParams{}); len(got) != 0 {
		t.Fatalf("refused batches left jobs %v", got)
	}
	if got := claim(t, s, 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v after refused batches", ids(got))
	}
	most := kj("m1", "m2", "m3", "m4")
	j := enqueue(t, s, most)[0]
	wantKeys(t, fmt.Sprintf("%d keys", readpast.MaxKeys), j, most.Keys)
}

// testKeysEveryKeyLimits: a job starts only when every key it names has
// a slot. Three jobs of three first keys share the later key api
// (concurrency 1): one runs at a time, in claim order; a full later key
// holds back nothing that does not name it.
func testKeysEveryKeyLimits(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 10})
	js := enqueue(t, s, kj("c:1", "api"), kj("c:2", "api"), kj("c:3", "api"))
	running := claim(t, s, 10, time.Minute)
	wantIDs(t, "first claim (api takes one at a time)", running, js[0])
	wantRunning(t, s, "after the first claim", "api", "api", 1)
	wantIDs(t, "again with api full", claim(t, s, 10, time.Minute))
	// Jobs that do not name api go (c:1's other job too); api's own job
	// waits with the others.
	others := enqueue(t, s, kj("c:4"), readpast.EnqueueParams{Kind: "k"}, kj("c:1", "b"), kj("api"))
	wantSet(t, "with api full", claim(t, s, 10, time.Minute), others[0], others[1], others[2])
	// Each completion of api's running job lets the next in claim order
	// start: c:2's, c:3's, then api's own (enqueued last).
	for i, next := range []*readpast.Job{js[1], js[2], others[3]} {
		mustComplete(t, s, running[0])
		what := fmt.Sprintf("after api's running job %d completed", running[0].ID)
		running = claim(t, s, 10, time.Minute)
		wantIDs(t, what, running, next)
		wantRunning(t, s, what, "api", "api", 1)
		if i < 2 {
			wantKeys(t, "Claim", running[0], []string{fmt.Sprint("c:", i+2), "api"})
		}
	}
	mustComplete(t, s, running[0])
	wantRunning(t, s, "with nothing of api running", "api", "api", 0)
}

// testKeysRateOnALaterKey: a later key's rate bounds the starts of every
// job that names it. api allows a burst of 2 and then one an hour: of
// four jobs of four first keys naming it (and one of api's own), two
// start, the first two in claim order, and no more after they finish;
// the key out of tokens holds back nothing that does not name it, not
// even a job of the first key of a job it holds.
func testKeysRateOnALaterKey(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 2})
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 10})
	js := enqueue(t, s, kj("c:1", "api"), kj("c:2", "api"), kj("c:3", "api"), kj("c:4", "api"), kj("api"))
	c := claim(t, s, 10, time.Minute)
	wantSet(t, "first claim (api's burst of 2 goes to the first two in claim order)", c, js[0], js[1])
	for i := range 3 {
		wantIDs(t, fmt.Sprintf("claim %d with api out of tokens", i+2), claim(t, s, 10, time.Minute))
	}
	mustComplete(t, s, c...)
	wantIDs(t, "after api's jobs completed (its concurrency is not what holds them)", claim(t, s, 10, time.Minute))
	free := enqueue(t, s, kj("c:5", "b"), readpast.EnqueueParams{Kind: "k"}, kj("c:1"))
	wantSet(t, "with api out of tokens", claim(t, s, 10, time.Minute), free...)
	info := ok(s.GetLimit(ctxT(t), "api")).must(t)
	if len(info.Keys) != 1 || info.Keys[0].Tokens != 0 || time.Until(info.Keys[0].NextStart) < 50*time.Minute {
		t.Fatalf("api's state %+v, want no token left and the next start about an hour away", info.Keys)
	}
	for _, j := range js[2:] {
		wantState(t, s, j.ID, readpast.StatePending)
	}
	// In one claim, a job its later key's rate holds back does not hold
	// back the jobs of its first key behind it.
	putLimit(t, s, readpast.Limit{Key: "once", Rate: 1, Per: time.Hour, Burst: 1})
	putLimit(t, s, readpast.Limit{Key: "r:*", Concurrency: 5})
	r := enqueue(t, s, kj("r:1", "once"), kj("r:2", "once"), kj("r:2"))
	wantSet(t, "jobs naming once (a burst of 1), and one that does not", claim(t, s, 10, time.Minute), r[0], r[2])
}

// testKeysSharedBudgetInOneClaim: within one claim a key's slots go to
// its own jobs and to the jobs naming it as a later key alike: x runs 2,
// so a claim of 10 takes two of the three jobs that name it.
func testKeysSharedBudgetInOneClaim(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "x", Concurrency: 2})
	js := enqueue(t, s, kj("x"), kj("a", "x"), kj("b", "x"))
	c := claim(t, s, 10, time.Minute)
	if len(c) != 2 {
		t.Fatalf("claimed %v, want 2 of %v (x runs 2 at once)", ids(c), ids(js))
	}
	wantRunning(t, s, "after the claim", "x", "x", 2)
	wantIDs(t, "again with x full", claim(t, s, 10, time.Minute))
	mustComplete(t, s, c[0])
	wantRunning(t, s, "after one completed", "x", "x", 1)
	last := claim(t, s, 10, time.Minute)
	if len(last) != 1 || slices.Contains(ids(c), last[0].ID) {
		t.Fatalf("after one of %v completed claimed %v, want the third job", ids(c), ids(last))
	}
	wantRunning(t, s, "after the third started", "x", "x", 2)
	// Several keys shared at once: y runs 1 and z runs 2.
	putLimit(t, s, readpast.Limit{Key: "y", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "z", Concurrency: 2})
	more := enqueue(t, s, kj("d", "y", "z"), kj("e", "z"), kj("f", "z", "y"), kj("z"))
	wantSet(t, "claim of jobs sharing y and z", claim(t, s, 10, time.Minute), more[0], more[1])
	wantRunning(t, s, "y", "y", "y", 1)
	wantRunning(t, s, "z", "z", "z", 2)
}

// testKeysFirstKeyNotHeldBack: a job held back by a later key holds back
// nothing else of its first key: c:1's job behind it in claim order
// starts; the held job starts once its later key has a slot.
func testKeysFirstKeyNotHeldBack(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	busy := enqueue(t, s, kj("z", "api"))[0]
	r := claim(t, s, 10, time.Minute)
	wantIDs(t, "api's first job", r, busy)
	js := enqueue(t, s, kj("c:1", "api"), kj("c:1"), kj("c:1", "d"))
	wantIDs(t, "with api full", claim(t, s, 10, time.Minute), js[1], js[2])
	wantIDs(t, "again with api full", claim(t, s, 10, time.Minute))
	wantRunning(t, s, "with api full", "c:*", "c:1", 2)
	mustComplete(t, s, r[0])
	wantIDs(t, "after api's job completed", claim(t, s, 10, time.Minute), js[0])
	wantRunning(t, s, "with all three of c:1 running", "c:*", "c:1", 3)
	wantRunning(t, s, "with c:1's job on api running", "api", "api", 1)
}

// testKeysFirstKeyNotHeldBackInClaimsOfOne: claims of one job each, the
// first job of c:1 held back by api (full): each claim takes c:1's next
// job that api does not hold back, rather than reading the held one again
// and taking nothing, and a claim that finds only held jobs leaves c:1
// unmarked rather than reading it again and again.
func testKeysFirstKeyNotHeldBackInClaimsOfOne(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	busy := enqueue(t, s, kj("z", "api"))[0]
	r := claim(t, s, 1, time.Minute)
	wantIDs(t, "api's first job", r, busy)
	js := enqueue(t, s, kj("c:1", "api"), kj("c:1"), kj("c:1"), kj("c:1", "api"))
	wantIDs(t, "first claim of one with api full", claim(t, s, 1, time.Minute), js[1])
	wantIDs(t, "second claim of one with api full", claim(t, s, 1, time.Minute), js[2])
	wantIDs(t, "third claim of one with api full", claim(t, s, 1, time.Minute))
	wantIDs(t, "fourth claim of one with api full", claim(t, s, 1, time.Minute))
	mustComplete(t, s, r[0])
	wantIDs(t, "after api's job completed", claim(t, s, 1, time.Minute), js[0])
}

// testKeysHeldFirstJobHidesNothing: A runs one job at a time; its first
// job also names K, which cannot start it (full, or out of tokens for an
// hour); its second names A alone. A claim starts the second at once:
// the held job does not hide the jobs of its first key behind it.
func testKeysHeldFirstJobHidesNothing(t *testing.T, h Harness) {
	for _, throttled := range []bool{false, true} {
		name := "K full"
		if throttled {
			name = "K out of tokens"
		}
		t.Run(name, func(t *testing.T) {
			s := newStore(t, h)
			putLimit(t, s, readpast.Limit{Key: "A", Concurrency: 1})
			if throttled {
				putLimit(t, s, readpast.Limit{Key: "K", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
			} else {
				putLimit(t, s, readpast.Limit{Key: "K", Concurrency: 1})
			}
			busy := enqueue(t, s, kj("z", "K"))[0]
			wantIDs(t, "K's first job", claim(t, s, 10, time.Minute), busy)
			js := enqueue(t, s, kj("A", "K"), kj("A"))
			wantIDs(t, "with K unable to start a job", claim(t, s, 10, time.Minute), js[1])
		})
	}
}

// testKeysTokenHeldJobDelaysNothing: c:1's first job also names r, out of
// tokens for an hour. A claim of 3 starts three of c:1's other jobs; the
// next claim starts its last one at once, not at r's next start.
func testKeysTokenHeldJobDelaysNothing(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "r", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	spent := enqueue(t, s, kj("z", "r"))[0]
	wantIDs(t, "r's one token", claim(t, s, 10, time.Minute), spent)
	js := enqueue(t, s, kj("c:1", "r"), kj("c:1"), kj("c:1"), kj("c:1"), kj("c:1"))
	wantIDs(t, "a claim of 3 with r out of tokens", claim(t, s, 3, time.Minute), js[1], js[2], js[3])
	wantIDs(t, "the next claim", claim(t, s, 3, time.Minute), js[4])
}
