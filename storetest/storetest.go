// Package storetest is the conformance suite every readpast.Store runs:
// the same semantics on every store, or a documented difference.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{New: newTestStore})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Harness tells the suite how to make stores and how hard to push them.
type Harness struct {
	// New returns a fresh, migrated, empty store; the suite closes it.
	New func(t *testing.T) readpast.Store
	// StressJobs is how many jobs the concurrency tests enqueue.
	// Defaults to 5000.
	StressJobs int
	// Claimers is how many goroutines claim concurrently in the
	// concurrency tests. Defaults to 32.
	Claimers int
	// Groups reads every concurrency group that has a row or running
	// jobs, in one snapshot. Required: the group stress test checks the
	// store's counters and limits against the jobs actually running.
	Groups func(ctx context.Context, s readpast.Store) ([]GroupState, error)
	// Deadlocks, if set, returns how many deadlocks the database has
	// detected so far; the group stress test wants none.
	Deadlocks func(ctx context.Context, s readpast.Store) (int64, error)
	// StressDuration is how long the group stress test runs. Defaults to
	// 5 seconds.
	StressDuration time.Duration
}

func (h Harness) withDefaults() Harness {
	if h.StressJobs == 0 {
		h.StressJobs = 5000
	}
	if h.Claimers == 0 {
		h.Claimers = 32
	}
	if h.StressDuration == 0 {
		h.StressDuration = 5 * time.Second
	}
	return h
}

// Run runs the whole suite, one subtest per behaviour.
func Run(t *testing.T, h Harness) {
	h = h.withDefaults()
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"EnqueueBatch", testEnqueueBatch},
		{"EnqueueInvalidChangesNothing", testEnqueueInvalid},
		{"ClaimOrder", testClaimOrder},
		{"RunAtNotClaimedEarly", testRunAtNotEarly},
		{"ClaimQueues", testClaimQueues},
		{"Fencing", testFencing},
		{"CompleteIdempotent", testCompleteIdempotent},
		{"BatchRepeatsAndBadEntries", testBatchRepeats},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseExpiryUsesUpAttempts", testLeaseExpiryMaxAttempts},
		{"ExtendKeepsLease", testExtend},
		{"FailRetriesThenFails", testFailRetries},
		{"FailDiscard", testFailDiscard},
		{"Release", testRelease},
		{"CancelAndRetry", testCancelRetry},
		{"ListAndStats", testListStats},
		{"Prune", testPrune},
		{"GroupMutualExclusion", testGroupExclusion},
		{"GroupLimit", testGroupLimit},
		{"GroupLimitChangesWhileRunning", testGroupLimitChanges},
		{"GroupHeadArrivesWhileRunning", testGroupNewHead},
		{"GroupBacklogHidesNothing", testGroupBacklog},
		{"GroupFutureHeadBlocksNothing", testGroupFutureHead},
		{"GroupIsOneStreamAcrossQueues", testGroupAcrossQueues},
		{"GroupFreedByEveryExit", testGroupFreed},
		{"BusyGroupBlocksNothing", testBusyGroup},
		{"ConcurrentClaimsExactlyOnce", testConcurrentExactlyOnce},
		{"ConcurrentGroupsNoOverlap", testConcurrentGroups},
		{"GroupLimitsUnderStress", testGroupStress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// newStore makes a store closed at the end of the test.
func newStore(t *testing.T, h Harness) readpast.Store {
	t.Helper()
	s := h.New(t)
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// result carries a call's two results to must.
type result[T any] struct {
	v   T
	err error
}

func ok[T any](v T, err error) result[T] { return result[T]{v, err} }

// must fails the test on an error.
func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func enqueue(t *testing.T, s readpast.Store, ps ...readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	return ok(s.Enqueue(ctxT(t), ps)).must(t)
}

func claim(t *testing.T, s readpast.Store, limit int, lease time.Duration, queues ...string) []*readpast.Job {
	t.Helper()
	return ok(s.Claim(ctxT(t), readpast.ClaimParams{Queues: queues, Worker: "w-" + t.Name(), Limit: limit, Lease: lease})).must(t)
}

func get(t *testing.T, s readpast.Store, id int64) *readpast.Job {
	t.Helper()
	return ok(s.Get(ctxT(t), id)).must(t)
}

func ids(jobs []*readpast.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func wantState(t *testing.T, s readpast.Store, id int64, want readpast.JobState) *readpast.Job {
	t.Helper()
	j := get(t, s, id)
	if j.State != want {
		t.Fatalf("job %d: state %s, want %s", id, j.State, want)
	}
	return j
}

func completeOne(ctx context.Context, s readpast.Store, j *readpast.Job, result string) error {
	var r json.RawMessage
	if result != "" {
		r = json.RawMessage(result)
	}
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token, Result: r}})
	if err != nil {
		return err
	}
	return errs[0]
}

func failOne(ctx context.Context, s readpast.Store, f readpast.Failure) error {
	errs, err := s.Fail(ctx, []readpast.Failure{f})
	if err != nil {
		return err
	}
	return errs[0]
}

func testEnqueueBatch(t *testing.T, h Harness) {
	s := newStore(t, h)
	const n = 10000
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	jobs := enqueue(t, s, ps...)
	if len(jobs) != n {
		t.Fatalf("enqueued %d, want %d", len(jobs), n)
	}
	for i, j := range jobs {
		var p struct{ I int }
		if err := json.Unmarshal(j.Payload, &p); err != nil || p.I != i {
			t.Fatalf("job %d: payload %s, want i=%d (order kept)", i, j.Payload, i)
		}
		if i > 0 && j.ID <= jobs[i-1].ID {
			t.Fatalf("ids not increasing in input order: %d after %d", j.ID, jobs[i-1].ID)
		}
		if j.State != readpast.StatePending || j.Queue != readpast.DefaultQueue || j.MaxAttempts != readpast.DefaultMaxAttempts || j.Attempt != 0 {
			t.Fatalf("job %d: defaults not applied: %+v", i, j)
		}
	}
	g := get(t, s, jobs[n-1].ID)
	if string(g.Payload) != fmt.Sprintf(`{"i": %d}`, n-1) && string(g.Payload) != fmt.Sprintf(`{"i":%d}`, n-1) {
		t.Fatalf("get payload %s", g.Payload)
	}
	if g.Errors == nil {
		t.Fatal("errors must be an empty list, not nil")
	}
	grp := "g1"
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "x", Queue: "q2", Priority: -5, MaxAttempts: 3, Group: grp, RunAt: time.Now().Add(time.Hour)})[0]
	g = get(t, s, j.ID)
	if g.Queue != "q2" || g.Priority != -5 || g.MaxAttempts != 3 || g.Group == nil || *g.Group != grp || time.Until(g.RunAt) < 59*time.Minute {
		t.Fatalf("options not stored: %+v", g)
	}
}

func testEnqueueInvalid(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	bad := []readpast.EnqueueParams{
		{Kind: ""},
		{Kind: "k", Payload: json.RawMessage(`{not json`)},
		{Kind: "k", Priority: readpast.MaxPriority + 1},
		{Kind: "k", MaxAttempts: -1},
		{Kind: "k", Queue: "has space"},
		{Kind: "k", Group: string(make([]byte, readpast.MaxNameLen+1))},
	}
	for i, b := range bad {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "ok"}, b})
		var fe *readpast.FieldError
		if !errors.Is(err, readpast.ErrInvalid) || !errors.As(err, &fe) || fe.Field == "" {
			t.Fatalf("bad job %d: got %v, want a FieldError", i, err)
		}
	}
	res := ok(s.List(ctx, readpast.ListParams{})).must(t)
	if len(res.Jobs) != 0 {
		t.Fatalf("a rejected batch left %d jobs behind", len(res.Jobs))
	}
	if _, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: -1, Lease: time.Second}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("claim limit -1: %v", err)
	}
	if _, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("claim without lease: %v", err)
	}
}

func testClaimOrder(t *testing.T, h Harness) {
	s := newStore(t, h)
	now := time.Now()
	// Enqueued out of order; expected claim order is priority, run_at, id.
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "a", Priority: 5, RunAt: now.Add(-1 * time.Minute)},               // 0
		readpast.EnqueueParams{Kind: "b", Priority: 1, RunAt: now.Add(-1 * time.Minute)},               // 1
		readpast.EnqueueParams{Kind: "c", Priority: 1, RunAt: now.Add(-3 * time.Minute)},               // 2
		readpast.EnqueueParams{Kind: "d", Priority: 1, RunAt: now.Add(-3 * time.Minute)},               // 3
		readpast.EnqueueParams{Kind: "e", Priority: -2, RunAt: now},                                    // 4
		readpast.EnqueueParams{Kind: "f", Priority: 5, RunAt: now.Add(-2 * time.Minute)},               // 5
		readpast.EnqueueParams{Kind: "g", Priority: 1, RunAt: now.Add(-1 * time.Minute), Group: "grp"}, // 6
	)
	want := []int64{jobs[4].ID, jobs[2].ID, jobs[3].ID, jobs[1].ID, jobs[6].ID, jobs[5].ID, jobs[0].ID}
	var got []int64
	for range want {
		c := claim(t, s, 1, time.Minute)
		if len(c) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(c))
		}
		got = append(got, c[0].ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("one at a time: claim order %v, want %v", got, want)
	}
	// A batch claim returns the same order.
	s2 := newStore(t, h)
	jobs = enqueue(t, s2,
		readpast.EnqueueParams{Kind: "a", Priority: 3},
		readpast.EnqueueParams{Kind: "b", Priority: 1, Group: "x"},
		readpast.EnqueueParams{Kind: "c", Priority: 2},
		readpast.EnqueueParams{Kind: "d", Priority: 1},
	)
	c := claim(t, s2, 10, time.Minute)
	if got, want := fmt.Sprint(ids(c)), fmt.Sprint([]int64{jobs[1].ID, jobs[3].ID, jobs[2].ID, jobs[0].ID}); got != want {
		t.Fatalf("batch claim order %v, want %v", got, want)
	}
	for _, j := range c {
		if j.State != readpast.StateRunning || j.Attempt != 1 || j.Token == "" || j.LeaseExpiresAt == nil || j.StartedAt == nil || j.Worker == "" {
			t.Fatalf("claimed job not marked running with token, lease, worker: %+v", j)
		}
	}
	// One claim, one token (the seeds' marker): every job of the call
	// carries it, and the next call gets another.
	for _, j := range c {
		if j.Token != c[0].Token {
			t.Fatalf("jobs of one claim carry tokens %s and %s", c[0].Token, j.Token)
		}
	}
	enqueue(t, s2, readpast.EnqueueParams{Kind: "e"})
	if next := claim(t, s2, 1, time.Minute); len(next) != 1 || next[0].Token == c[0].Token {
		t.Fatalf("a second claim reused the first one's token: %+v", next)
	}
}

func testRunAtNotEarly(t *testing.T, h Harness) {
	s := newStore(t, h)
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(700 * time.Millisecond)})[0]
	far := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(time.Hour), Priority: -100})[0]
	if c := claim(t, s, 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v before run_at", ids(c))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := claim(t, s, 10, time.Minute)
		if len(c) == 1 {
			if c[0].ID != later.ID {
				t.Fatalf("claimed %d, want %d", c[0].ID, later.ID)
			}
			if time.Now().Before(later.RunAt) {
				t.Fatalf("claimed at %v, before run_at %v", time.Now(), later.RunAt)
			}
			break
		}
		if len(c) > 1 || time.Now().After(deadline) {
			t.Fatalf("claimed %v; want job %d once run_at passed", ids(c), later.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantState(t, s, far.ID, readpast.StatePending)
}

func testClaimQueues(t *testing.T, h Harness) {
	s := newStore(t, h)
	a := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a", Priority: 2})[0]
	b := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "b", Priority: 1})[0]
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "c"})
	if c := claim(t, s, 10, time.Minute, "zzz"); len(c) != 0 {
		t.Fatalf("claimed %v from an empty queue", ids(c))
	}
	c := claim(t, s, 10, time.Minute, "a", "b")
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{b.ID, a.ID}) {
		t.Fatalf("claimed %v from queues a,b; want [%d %d]", ids(c), b.ID, a.ID)
	}
}

// expire waits out a lease and rescues it.
func expire(t *testing.T, s readpast.Store, lease time.Duration) {
	t.Helper()
	time.Sleep(lease + 20*time.Millisecond)
	ok(s.RescueExpired(ctxT(t), 1000)).must(t)
}

func testFencing(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	const lease = 150 * time.Millisecond
	a := claim(t, s, 1, lease)[0] // worker A
	expire(t, s, lease)
	b := claim(t, s, 1, time.Minute)[0] // worker B re-claims
	if b.ID != j.ID || b.Token == a.Token || b.Attempt != 2 {
		t.Fatalf("re-claim: %+v (A's token %s)", b, a.Token)
	}
	before := get(t, s, j.ID)
	// Every write with A's stale token changes nothing and says so.
	if err := completeOne(ctx, s, a, `{"by":"A"}`); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete with stale token: %v", err)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: a.ID, Token: a.Token, Message: "A"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("fail with stale token: %v", err)
	}
	if _, err := s.Extend(ctx, a.ID, a.Token, time.Hour); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("extend with stale token: %v", err)
	}
	if err := s.Release(ctx, a.ID, a.Token); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("release with stale token: %v", err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: a.ID, Token: "not-a-token"}, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete with malformed token: %v", err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: 987654, Token: "not-a-token"}, ""); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("complete an unknown job with a malformed token: %v", err)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: 987654, Token: "not-a-token"}); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("fail an unknown job with a malformed token: %v", err)
	}
	after := get(t, s, j.ID)
	if after.State != readpast.StateRunning || after.Token != b.Token || after.Attempt != before.Attempt ||
		!after.LeaseExpiresAt.Equal(*before.LeaseExpiresAt) || len(after.Errors) != len(before.Errors) {
		t.Fatalf("stale writes changed the job:\nbefore %+v\nafter  %+v", before, after)
	}
	// B's claim stands.
	if err := completeOne(ctx, s, b, `{"by":"B"}`); err != nil {
		t.Fatalf("complete with current token: %v", err)
	}
	done := wantState(t, s, j.ID, readpast.StateSucceeded)
	if string(done.Result) != `{"by": "B"}` && string(done.Result) != `{"by":"B"}` {
		t.Fatalf("result %s, want B's", done.Result)
	}
	if done.FinishedAt == nil || done.Worker == "" {
		t.Fatalf("finished job lacks finished_at or worker: %+v", done)
	}
	// A's token stays stale after the job finished; unknown ids are not found.
	if err := completeOne(ctx, s, a, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale complete after finish: %v", err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: j.ID + 1000, Token: b.Token}, ""); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("complete unknown job: %v", err)
	}
	// One batch mixing current, stale and unknown entries.
	k := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	kc := claim(t, s, 1, time.Minute)[0]
	errs := ok(s.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}, {ID: k.ID, Token: kc.Token}, {ID: 999999, Token: kc.Token}})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil || !errors.Is(errs[2], readpast.ErrNotFound) {
		t.Fatalf("mixed batch: %v", errs)
	}
	wantState(t, s, k.ID, readpast.StateSucceeded)
}

func testCompleteIdempotent(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k"})
	c := claim(t, s, 1, time.Minute)[0]
	if err := completeOne(ctx, s, c, `1`); err != nil {
		t.Fatal(err)
	}
	first := get(t, s, c.ID)
	// A retried completion (its response was lost) is accepted once more and
	// changes nothing.
	if err := completeOne(ctx, s, c, `2`); err != nil {
		t.Fatalf("repeated completion with the same token: %v", err)
	}
	again := get(t, s, c.ID)
	if string(again.Result) != string(first.Result) || !again.FinishedAt.Equal(*first.FinishedAt) {
		t.Fatalf("repeated completion changed the job: %+v -> %+v", first, again)
	}
	// But failing it now is stale.
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "late"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("fail after completion: %v", err)
	}
}

// testBatchRepeats: a batch that names a job twice, or carries one entry
// that cannot be stored, settles every entry as if applied one after
// another: each (id, token) pair acts once, a stale or malformed entry
// before the current one does not stand for it, and a group slot is freed
// once.
func testBatchRepeats(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "R", 2); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
	)
	c := claim(t, s, 10, time.Minute)
	if len(c) != 2 {
		t.Fatalf("claimed %d of a group limited to 2", len(c))
	}
	a, b := c[0], c[1]
	// Fail a twice in one batch (retry later): one attempt ends, one slot frees.
	errs := ok(s.Fail(ctx, []readpast.Failure{
		{ID: a.ID, Token: a.Token, Message: "x\x00y \xff", RetryAt: time.Now().Add(time.Hour)},
		{ID: a.ID, Token: a.Token, Message: "again", RetryAt: time.Now().Add(time.Hour)},
	})).must(t)
	if errs[0] != nil || !errors.Is(errs[1], readpast.ErrStaleToken) {
		t.Fatalf("fail with a repeated entry: %v", errs)
	}
	if j := get(t, s, a.ID); len(j.Errors) != 1 || j.Errors[0].Message != "xy \uFFFD" {
		t.Fatalf("one error, cleaned of NUL and invalid UTF-8, want %q: %+v", "xy \uFFFD", j.Errors)
	}
	if more := claim(t, s, 10, time.Minute); len(more) != 1 {
		t.Fatalf("after one failure %d more jobs ran; the slot was freed %d times", len(more), len(more))
	} else {
		a = more[0]
	}
	// Complete a and b with repeats, a bad result and a stale token mixed
	// in. b's first entry cannot be stored, so its second entry, the first
	// storable one with b's token, completes it.
	errs = ok(s.Complete(ctx, []readpast.Completion{
		{ID: a.ID, Token: a.Token},
		{ID: b.ID, Token: b.Token, Result: json.RawMessage(`"nul \u0000"`)},
		{ID: a.ID, Token: a.Token},
		{ID: a.ID, Token: "00000000-0000-0000-0000-000000000000"},
		{ID: b.ID, Token: b.Token, Result: json.RawMessage(`"fine"`)},
	})).must(t)
	if errs[0] != nil || !errors.Is(errs[1], readpast.ErrInvalid) || errs[2] != nil ||
		!errors.Is(errs[3], readpast.ErrStaleToken) || errs[4] != nil {
		t.Fatalf("mixed completion batch: %v", errs)
	}
	wantState(t, s, a.ID, readpast.StateSucceeded)
	if j := wantState(t, s, b.ID, readpast.StateSucceeded); string(j.Result) != `"fine"` {
		t.Fatalf("b's result %s, want the storable entry's", j.Result)
	}
	// Exactly two slots came back: with three jobs waiting, two run.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "R"}, readpast.EnqueueParams{Kind: "k", Group: "R"})
	more := claim(t, s, 10, time.Minute)
	if len(more) != 2 {
		t.Fatalf("after two completions %d more jobs ran, want 2", len(more))
	}
	x, y := more[0], more[1]

	// A stale entry before the current one: the current one still acts.
	errs = ok(s.Complete(ctx, []readpast.Completion{
		{ID: x.ID, Token: "00000000-0000-0000-0000-000000000000"},
		{ID: x.ID, Token: x.Token, Result: json.RawMessage(`1`)},
		{ID: x.ID, Token: x.Token, Result: json.RawMessage(`2`)},
	})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil || errs[2] != nil {
		t.Fatalf("complete [stale, current, current again]: %v", errs)
	}
	if j := wantState(t, s, x.ID, readpast.StateSucceeded); string(j.Result) != `1` {
		t.Fatalf("result %s, want the first current entry's", j.Result)
	}
	// A malformed token before the current one: the failure is recorded.
	errs = ok(s.Fail(ctx, []readpast.Failure{
		{ID: y.ID, Token: "not-a-token", Message: "m"},
		{ID: y.ID, Token: y.Token, Message: "real", RetryAt: time.Now().Add(time.Hour)},
	})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil {
		t.Fatalf("fail [malformed, current]: %v", errs)
	}
	if j := wantState(t, s, y.ID, readpast.StatePending); len(j.Errors) != 1 || j.Errors[0].Message != "real" {
		t.Fatalf("after fail [malformed, current]: %+v", j.Errors)
	}
	// Unknown ids: not found, repeats too.
	errs = ok(s.Complete(ctx, []readpast.Completion{{ID: 1 << 40, Token: x.Token}, {ID: 1 << 40, Token: x.Token}})).must(t)
	if !errors.Is(errs[0], readpast.ErrNotFound) || !errors.Is(errs[1], readpast.ErrNotFound) {
		t.Fatalf("unknown id twice: %v", errs)
	}
}

func testLeaseExpiry(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go readpast.RunRescuer(ctx, s, 100*time.Millisecond, discardLogger())
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 5})[0]
	const lease = time.Second
	first := claim(t, s, 1, lease)[0]
	expiry := *first.LeaseExpiresAt
	if got := claim(t, s, 1, lease); len(got) != 0 {
		t.Fatalf("claimed %v while the lease was valid", ids(got))
	}
	var again []*readpast.Job
	for len(again) == 0 {
		if time.Since(expiry) > time.Second {
			t.Fatalf("job not claimable again within 1s of its lease expiring")
		}
		time.Sleep(10 * time.Millisecond)
		again = claim(t, s, 1, time.Minute)
	}
	if now := time.Now(); now.Before(expiry) {
		t.Fatalf("re-claimed at %v, before the lease expired at %v", now, expiry)
	}
	if again[0].ID != j.ID || again[0].Attempt != 2 {
		t.Fatalf("re-claimed %+v, want job %d at attempt 2", again[0], j.ID)
	}
	if len(again[0].Errors) != 1 || again[0].Errors[0].Attempt != 1 || again[0].Errors[0].Message == "" {
		t.Fatalf("expiry not recorded as a failed attempt: %+v", again[0].Errors)
	}
}

func testLeaseExpiryMaxAttempts(t *testing.T, h Harness) {
	s := newStore(t, h)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 2})[0]
	const lease = 100 * time.Millisecond
	for attempt := 1; attempt <= 2; attempt++ {
		c := claim(t, s, 1, lease)
		if len(c) != 1 || c[0].Attempt != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, c)
		}
		expire(t, s, lease)
	}
	f := wantState(t, s, j.ID, readpast.StateFailed)
	if f.Attempt != 2 || len(f.Errors) != 2 || f.FinishedAt == nil {
		t.Fatalf("failed job: attempt %d, %d errors, finished %v", f.Attempt, len(f.Errors), f.FinishedAt)
	}
	if c := claim(t, s, 1, lease); len(c) != 0 {
		t.Fatalf("a job with no attempts left was claimed again: %v", ids(c))
	}
}

func testExtend(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k"})
	const lease = time.Second
	c := claim(t, s, 1, lease)[0]
	for range 3 {
		time.Sleep(lease / 2)
		exp, err := s.Extend(ctx, c.ID, c.Token, lease)
		if err != nil {
			t.Fatal(err)
		}
		if time.Until(exp) < lease/2 {
			t.Fatalf("extended lease ends %v, too soon", exp)
		}
		ok(s.RescueExpired(ctx, 100)).must(t)
	}
	// 1.5 s after a 1 s lease: still ours, because we kept extending.
	if err := completeOne(ctx, s, c, ""); err != nil {
		t.Fatalf("complete after extending: %v", err)
	}
	if _, err := s.Extend(ctx, c.ID, c.Token, 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("extend by 0: %v", err)
	}
}

func testFailRetries(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 2, Group: "fg"})[0]
	c := claim(t, s, 1, time.Minute)[0]
	retryAt := time.Now().Add(300 * time.Millisecond)
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "boom", Stack: "stack here", RetryAt: retryAt}); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, s, j.ID, readpast.StatePending)
	if len(p.Errors) != 1 || p.Errors[0].Message != "boom" || p.Errors[0].Stack != "stack here" || p.Errors[0].Attempt != 1 || p.Errors[0].Worker == "" {
		t.Fatalf("error not recorded: %+v", p.Errors)
	}
	if p.RunAt.Before(retryAt.Add(-time.Millisecond)) {
		t.Fatalf("retry run_at %v, want %v", p.RunAt, retryAt)
	}
	if c := claim(t, s, 1, time.Minute); len(c) != 0 {
		t.Fatal("claimed before the retry time")
	}
	time.Sleep(time.Until(retryAt) + 10*time.Millisecond)
	c = claim(t, s, 1, time.Minute)[0]
	if c.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", c.Attempt)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "boom again"}); err != nil {
		t.Fatal(err)
	}
	f := wantState(t, s, j.ID, readpast.StateFailed)
	if len(f.Errors) != 2 || f.Errors[1].Message != "boom again" || f.FinishedAt == nil {
		t.Fatalf("final failure: %+v", f)
	}
	// The group slot was freed: another job of the group runs.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "fg"})
	if c := claim(t, s, 1, time.Minute); len(c) != 1 {
		t.Fatal("group still blocked after its job failed for good")
	}
}

func testFailDiscard(t *testing.T, h Harness) {
	s := newStore(t, h)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 10})[0]
	c := claim(t, s, 1, time.Minute)[0]
	if err := failOne(ctxT(t), s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "fatal", Discard: true}); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, j.ID, readpast.StateFailed)
}

func testRelease(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "rg"})[0]
	c := claim(t, s, 1, time.Minute)[0]
	if err := s.Release(ctx, c.ID, c.Token); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, s, j.ID, readpast.StatePending)
	if p.Attempt != 0 {
		t.Fatalf("released attempt counted: %d", p.Attempt)
	}
	c2 := claim(t, s, 1, time.Minute)
	if len(c2) != 1 || c2[0].Attempt != 1 {
		t.Fatalf("released job not claimable at once (group slot freed): %+v", c2)
	}
	if err := s.Release(ctx, c.ID, c.Token); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("release with old token: %v", err)
	}
}

func testCancelRetry(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	pending := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Priority: 1})[0]
	running := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "cg"})[0]
	rc := claim(t, s, 1, time.Minute)[0]
	if rc.ID != running.ID {
		t.Fatalf("claimed %d, want %d", rc.ID, running.ID)
	}
	for _, id := range []int64{pending.ID, running.ID} {
		j, err := s.Cancel(ctx, id)
		if err != nil || j.State != readpast.StateCancelled || j.FinishedAt == nil {
			t.Fatalf("cancel %d: %+v %v", id, j, err)
		}
	}
	if err := completeOne(ctx, s, rc, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete after cancel: %v", err)
	}
	if _, err := s.Cancel(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("cancel a cancelled job: %v", err)
	}
	if _, err := s.Cancel(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	// Retry brings it back with the same id, attempts reset, errors kept.
	r, err := s.Retry(ctx, running.ID)
	if err != nil || r.State != readpast.StatePending || r.Attempt != 0 || r.ID != running.ID {
		t.Fatalf("retry: %+v %v", r, err)
	}
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != running.ID {
		t.Fatalf("after retry claimed %v, want [%d] (group slot freed by cancel)", ids(c), running.ID)
	}
	if _, err := s.Retry(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("retry a running job: %v", err)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("retry a succeeded job: %v", err)
	}
	if _, err := s.Retry(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
	// Retrying a pending job makes it run now.
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(time.Hour)})[0]
	if r, err := s.Retry(ctx, later.ID); err != nil || time.Until(r.RunAt) > time.Second {
		t.Fatalf("retry pending: %+v %v", r, err)
	}
	if c := claim(t, s, 1, time.Minute); len(c) != 1 || c[0].ID != later.ID {
		t.Fatalf("retried pending job not claimable now: %v", ids(c))
	}
}

func testListStats(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for i := range 25 {
		q := "qa"
		if i%5 == 0 {
			q = "qb"
		}
		enqueue(t, s, readpast.EnqueueParams{Kind: fmt.Sprintf("k%d", i%2), Queue: q, Group: map[bool]string{true: "lg"}[i == 3]})
	}
	c := claim(t, s, 2, time.Minute, "qa")
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	var all []*readpast.Job
	cursor := ""
	for {
		page := ok(s.List(ctx, readpast.ListParams{Limit: 7, Cursor: cursor})).must(t)
		all = append(all, page.Jobs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(all) != 25 {
		t.Fatalf("paged through %d jobs, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatal("list not newest first")
		}
	}
	check := func(p readpast.ListParams, want int) {
		t.Helper()
		got := ok(s.List(ctx, p)).must(t)
		if len(got.Jobs) != want {
			t.Fatalf("list %+v: %d jobs, want %d", p, len(got.Jobs), want)
		}
	}
	check(readpast.ListParams{Queue: "qb"}, 5)
	check(readpast.ListParams{State: readpast.StateSucceeded}, 1)
	check(readpast.ListParams{State: readpast.StateRunning}, 1)
	check(readpast.ListParams{Kind: "k1"}, 12)
	check(readpast.ListParams{Group: "lg"}, 1)
	if _, err := s.List(ctx, readpast.ListParams{State: "bogus"}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bad state filter: %v", err)
	}
	if _, err := s.List(ctx, readpast.ListParams{Cursor: "x"}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bad cursor: %v", err)
	}
	stats := ok(s.Stats(ctx)).must(t)
	got := map[string]int64{}
	for _, st := range stats {
		got[st.Queue+"/"+string(st.State)] = st.Count
	}
	want := map[string]int64{"qa/pending": 18, "qa/running": 1, "qa/succeeded": 1, "qb/pending": 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats %v, want %v", got, want)
	}
}

func testPrune(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, make5("k")...)
	for _, c := range claim(t, s, 3, time.Minute) {
		if err := completeOne(ctx, s, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	n := ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(time.Second), Limit: 2})).must(t)
	if n != 2 {
		t.Fatalf("pruned %d, want 2 (batch limit)", n)
	}
	n = ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateFailed, Before: time.Now().Add(time.Second)})).must(t)
	if n != 0 {
		t.Fatalf("pruned %d failed jobs, want 0", n)
	}
	n = ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(-time.Hour)})).must(t)
	if n != 0 {
		t.Fatalf("pruned %d jobs finished after the cutoff", n)
	}
	if _, err := s.Prune(ctx, readpast.PruneParams{State: readpast.StatePending}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("prune live state: %v", err)
	}
	if got := len(ok(s.List(ctx, readpast.ListParams{})).must(t).Jobs); got != 3 {
		t.Fatalf("%d jobs left, want 3", got)
	}
}

func make5(kind string) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, 5)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: kind}
	}
	return ps
}

func testGroupExclusion(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	g1 := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "G"},
		readpast.EnqueueParams{Kind: "k", Group: "G"},
		readpast.EnqueueParams{Kind: "k", Group: "G"},
	)
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != g1[0].ID {
		t.Fatalf("claimed %v, want only the oldest of the group [%d]", ids(c), g1[0].ID)
	}
	if more := claim(t, s, 10, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %v while the group was busy", ids(more))
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != g1[1].ID {
		t.Fatalf("after completion claimed %v, want [%d]", ids(c), g1[1].ID)
	}
}

// testGroupAcrossQueues: a group is one ordered stream whatever queues its
// jobs are in. A claimer of queue b does not start the group's job in b
// while the group's older job in queue a waits.
func testGroupAcrossQueues(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Queue: "a", Group: "S"},
		readpast.EnqueueParams{Kind: "k", Queue: "b", Group: "S"},
		readpast.EnqueueParams{Kind: "k", Queue: "b"},
	)
	if c := claim(t, s, 10, time.Minute, "b"); fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[2].ID}) {
		t.Fatalf("claimer of b took %v; want only the ungrouped job %d while the group's head waits in a", ids(c), jobs[2].ID)
	}
	c := claim(t, s, 10, time.Minute, "a")
	if len(c) != 1 || c[0].ID != jobs[0].ID {
		t.Fatalf("claimer of a took %v, want [%d]", ids(c), jobs[0].ID)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute, "b"); len(c) != 1 || c[0].ID != jobs[1].ID {
		t.Fatalf("after the head finished, claimer of b took %v, want [%d]", ids(c), jobs[1].ID)
	}
}

func testGroupLimit(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "K", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupLimit(ctx, "K", 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
	jobs := enqueue(t, s, make5("k")[0], readpast.EnqueueParams{Kind: "k", Group: "K"}, readpast.EnqueueParams{Kind: "k", Group: "K"}, readpast.EnqueueParams{Kind: "k", Group: "K"})
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[0].ID, jobs[1].ID, jobs[2].ID}) {
		t.Fatalf("claimed %v, want the ungrouped job and the group's two oldest", ids(c))
	}
	if err := completeOne(ctx, s, c[1], ""); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != jobs[3].ID {
		t.Fatalf("claimed %v, want [%d]", ids(c), jobs[3].ID)
	}
}

// testGroupLimitChanges: lowering a group's limit below what runs lets
// nothing new start until the group is under the new limit; raising it
// lets more start at once. The limit of a group that never ran survives.
func testGroupLimitChanges(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "L", 3); err != nil {
		t.Fatal(err)
	}
	var ps []readpast.EnqueueParams
	for range 8 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "L"})
	}
	enqueue(t, s, ps...)
	running := claim(t, s, 10, time.Minute)
	if len(running) != 3 {
		t.Fatalf("claimed %d under a limit of 3", len(running))
	}
	if err := s.SetGroupLimit(ctx, "L", 1); err != nil {
		t.Fatal(err)
	}
	for i, j := range running[:2] {
		if err := completeOne(ctx, s, j, ""); err != nil {
			t.Fatal(err)
		}
		if c := claim(t, s, 10, time.Minute); len(c) != 0 {
			t.Fatalf("after %d of 3 finished under a new limit of 1, claimed %d", i+1, len(c))
		}
	}
	if err := completeOne(ctx, s, running[2], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 1 {
		t.Fatalf("with the group empty, claimed %d under a limit of 1", len(c))
	}
	if err := s.SetGroupLimit(ctx, "L", 4); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 3 {
		t.Fatalf("with the limit raised to 4 and 1 running, claimed %d, want 3", len(c))
	}
	// A limit set before the group has ever run.
	if err := s.SetGroupLimit(ctx, "fresh", 2); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "fresh"}, readpast.EnqueueParams{Kind: "k", Group: "fresh"}, readpast.EnqueueParams{Kind: "k", Group: "fresh"})
	if c := claim(t, s, 10, time.Minute); len(c) != 2 {
		t.Fatalf("a fresh group with limit 2 gave %d", len(c))
	}
}

// testGroupNewHead: a job that arrives ahead of a group's running jobs
// (higher priority) runs before the group's older pending jobs, and only
// within the limit.
func testGroupNewHead(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "H", 2); err != nil {
		t.Fatal(err)
	}
	old := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "H"}, readpast.EnqueueParams{Kind: "k", Group: "H"}, readpast.EnqueueParams{Kind: "k", Group: "H"})
	first := claim(t, s, 1, time.Minute)
	if len(first) != 1 || first[0].ID != old[0].ID {
		t.Fatalf("claimed %v, want the oldest", ids(first))
	}
	urgent := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "H", Priority: -1})[0]
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != urgent.ID {
		t.Fatalf("claimed %v, want only the urgent job %d (limit 2, one running)", ids(c), urgent.ID)
	}
	if err := completeOne(ctx, s, first[0], ""); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, 10, time.Minute); len(c) != 1 || c[0].ID != old[1].ID {
		t.Fatalf("claimed %v, want the next oldest %d", ids(c), old[1].ID)
	}
}

// testGroupBacklog: a big batch enqueued into a few groups, ahead of other
// groups and ungrouped jobs in claim order, hides none of them from one
// claim, in any queue.
func testGroupBacklog(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "B", 3); err != nil {
		t.Fatal(err)
	}
	var ps []readpast.EnqueueParams
	for i := range 400 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Group: []string{"A", "B"}[i/200]})
	}
	for i := range 6 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Priority: 1})
	}
	jobs := enqueue(t, s, ps...)
	late := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q2", Group: "C"})[0]
	// A gives its head, B its first three, C its only job, then the six
	// ungrouped jobs (priority 1).
	want := []int64{jobs[0].ID, jobs[200].ID, jobs[201].ID, jobs[202].ID, late.ID}
	for _, j := range jobs[400:] {
		want = append(want, j.ID)
	}
	if got := claim(t, s, 50, time.Minute, "q1", "q2"); fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("claimed %v\nwant    %v", ids(got), want)
	}
	if got := claim(t, s, 50, time.Minute, "q1", "q2"); len(got) != 0 {
		t.Fatalf("claimed %v with every group full", ids(got))
	}
}

// testGroupFutureHead: a group's first job in claim order that is not due
// yet holds back nothing; it runs once it is due and the group has a slot.
// A job that comes due in a group where nothing else happens meanwhile
// (alone, or after the group's other job finished before it came due) is
// found too: nothing but its own enqueue could have announced it.
func testGroupFutureHead(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	soon := time.Now().Add(300 * time.Millisecond)
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "F", Priority: -5, RunAt: soon},
		readpast.EnqueueParams{Kind: "k", Group: "F"},
	)
	alone := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "alone", RunAt: soon})[0]
	after := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "after"},
		readpast.EnqueueParams{Kind: "k", Group: "after", RunAt: soon},
	)
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{jobs[1].ID, after[0].ID}) {
		t.Fatalf("claimed %v, want the due jobs %d and %d", ids(c), jobs[1].ID, after[0].ID)
	}
	if err := completeOne(ctx, s, c[1], ""); err != nil { // group "after" idle before its next job is due
		t.Fatal(err)
	}
	c = c[:1]
	time.Sleep(time.Until(soon) + 50*time.Millisecond)
	due := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(due)) != fmt.Sprint([]int64{alone.ID, after[1].ID}) {
		t.Fatalf("once due, claimed %v, want %d and %d (F's slot is still taken)", ids(due), alone.ID, after[1].ID)
	}
	if got := claim(t, s, 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while the group's slot is taken", ids(got))
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, 10, time.Minute); len(got) != 1 || got[0].ID != jobs[0].ID {
		t.Fatalf("claimed %v, want the job that came due, %d", ids(got), jobs[0].ID)
	}
}

// testGroupFreed: every way out of running frees the group slot.
func testGroupFreed(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	ways := []struct {
		name string
		exit func(j *readpast.Job) error
	}{
		{"complete", func(j *readpast.Job) error { return completeOne(ctx, s, j, "") }},
		{"fail-retry", func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now().Add(time.Hour)})
		}},
		{"fail-final", func(j *readpast.Job) error {
			return failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", Discard: true})
		}},
		{"release", func(j *readpast.Job) error {
			if err := s.Release(ctx, j.ID, j.Token); err != nil {
				return err
			}
			_, err := s.Cancel(ctx, j.ID) // out of the way
			return err
		}},
		{"cancel", func(j *readpast.Job) error { _, err := s.Cancel(ctx, j.ID); return err }},
		{"expire", func(j *readpast.Job) error {
			time.Sleep(time.Until(*j.LeaseExpiresAt) + 20*time.Millisecond)
			if _, err := s.RescueExpired(ctx, 10); err != nil {
				return err
			}
			_, err := s.Cancel(ctx, j.ID)
			return err
		}},
	}
	for _, w := range ways {
		group := "free-" + w.name
		jobs := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: group}, readpast.EnqueueParams{Kind: "k", Group: group})
		c := claim(t, s, 10, 200*time.Millisecond)
		if len(c) != 1 || c[0].ID != jobs[0].ID {
			t.Fatalf("%s: claimed %v", w.name, ids(c))
		}
		if err := w.exit(c[0]); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		c = claim(t, s, 10, time.Minute)
		if len(c) != 1 || c[0].ID != jobs[1].ID {
			t.Fatalf("%s: after exit claimed %v, want [%d]: slot not freed", w.name, ids(c), jobs[1].ID)
		}
		if _, err := s.Cancel(ctx, c[0].ID); err != nil {
			t.Fatal(err)
		}
	}
}

func testBusyGroup(t *testing.T, h Harness) {
	s := newStore(t, h)
	// A busy group with a long backlog ahead of everything else in claim
	// order must not hold back other groups or ungrouped jobs.
	var ps []readpast.EnqueueParams
	for range 500 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "busy", Priority: -10})
	}
	enqueue(t, s, ps...)
	first := claim(t, s, 1, time.Minute)
	if len(first) != 1 || *first[0].Group != "busy" {
		t.Fatalf("claimed %+v", first)
	}
	others := enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "other1"},
		readpast.EnqueueParams{Kind: "k"},
		readpast.EnqueueParams{Kind: "k", Group: "other2"},
	)
	c := claim(t, s, 10, time.Minute)
	if fmt.Sprint(ids(c)) != fmt.Sprint(ids(others)) {
		t.Fatalf("with a busy group claimed %v, want %v", ids(c), ids(others))
	}
}

func sortedIDs(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
