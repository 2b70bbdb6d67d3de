package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testRetrying: the jobs waiting to run again after a failed attempt (a
// failure with attempts left, or an expired lease) are counted per queue
// and listed newest failure first, by queue, up to a limit, and within
// the scan budget the latest started first; a job snoozed or released on
// its first attempt, failed for good, retried from failed or running
// again is not retrying.
func testRetrying(t *testing.T, h Harness) {
	s, in := newInspector(t, h)
	ctx := ctxT(t)
	start := time.Now()
	later := start.Add(time.Hour)
	// begin claims the one due job of queue and checks it is id.
	begin := func(queue string, id int64, lease time.Duration) *readpast.Job {
		t.Helper()
		c := claim(t, s, 1, lease, queue)
		if len(c) != 1 || c[0].ID != id {
			t.Fatalf("claimed %v from %s, want %d", ids(c), queue, id)
		}
		return c[0]
	}
	fail := func(j *readpast.Job, msg string, retryAt time.Time, discard bool) {
		t.Helper()
		if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: msg, RetryAt: retryAt, Discard: discard}); err != nil {
			t.Fatal(err)
		}
		// Failures a few milliseconds apart, so that their order is
		// their times' on every store's clock.
		time.Sleep(5 * time.Millisecond)
	}
	job := func(queue string) int64 {
		t.Helper()
		return enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: queue, MaxAttempts: 5})[0].ID
	}

	// Started first, failed third: E (ra). A (ra) and B (rb) start and
	// fail in turn; D (rb) starts last and its lease expires.
	e := job("ra")
	je := begin("ra", e, time.Minute)
	a := job("ra")
	fail(begin("ra", a, time.Minute), "a failed", later, false)
	b := job("rb")
	fail(begin("rb", b, time.Minute), "b failed", later, false)
	fail(je, "e failed", later, false)
	d := job("rb")
	begin("rb", d, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if n := ok(s.RescueExpired(ctx, 100)).must(t); n != 1 {
		t.Fatalf("rescued %d jobs, want 1", n)
	}
	// Not retrying, all in rc: snoozed and released on their first
	// attempt, failed for good, failed for good and retried, and failed
	// then running again.
	n1 := job("rc")
	if err := s.Snooze(ctx, n1, begin("rc", n1, time.Minute).Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	n3 := job("rc")
	fail(begin("rc", n3, time.Minute), "n3 failed", time.Time{}, true)
	n5 := job("rc")
	fail(begin("rc", n5, time.Minute), "n5 failed", time.Now().Add(-time.Second), false)
	begin("rc", n5, time.Minute)
	n4 := job("rc")
	fail(begin("rc", n4, time.Minute), "n4 failed", time.Time{}, true)
	ok(s.Retry(ctx, n4)).must(t)
	begin("rc", n4, time.Minute) // running: only the released job below stays due
	n2 := job("rc")
	if err := s.Release(ctx, n2, begin("rc", n2, time.Minute).Token); err != nil {
		t.Fatal(err)
	}

	// The counts.
	retrying := map[string]int64{}
	for _, q := range ok(in.QueueSummaries(ctx, start.Add(-time.Minute))).must(t) {
		retrying[q.Name] = q.Retrying
		if q.Retrying > q.Pending+q.Scheduled {
			t.Errorf("queue %s: %d retrying of %d pending and %d scheduled", q.Name, q.Retrying, q.Pending, q.Scheduled)
		}
	}
	if want := map[string]int64{"ra": 2, "rb": 2, "rc": 0}; !sameCounts(retrying, want) {
		t.Errorf("retrying per queue %v, want %v", retrying, want)
	}

	// The lists.
	list := func(p readpast.RetryingParams) ([]int64, bool) {
		t.Helper()
		res := ok(in.Retrying(ctx, p)).must(t)
		if res.Jobs == nil {
			t.Fatalf("retrying %+v: nil jobs", p)
		}
		for _, j := range res.Jobs {
			if j.State != readpast.StatePending || j.Attempt < 1 || len(j.Errors) == 0 {
				t.Fatalf("retrying %+v: job %d is %s at attempt %d with %d errors", p, j.ID, j.State, j.Attempt, len(j.Errors))
			}
		}
		return ids(res.Jobs), res.Partial
	}
	cases := []struct {
		name    string
		p       readpast.RetryingParams
		want    []int64
		partial bool
	}{
		{"all", readpast.RetryingParams{}, []int64{d, e, b, a}, false},
		{"queue ra", readpast.RetryingParams{Queue: "ra"}, []int64{e, a}, false},
		{"queue rb", readpast.RetryingParams{Queue: "rb"}, []int64{d, b}, false},
		{"queue without any", readpast.RetryingParams{Queue: "rc"}, []int64{}, false},
		{"unknown queue", readpast.RetryingParams{Queue: "nosuch"}, []int64{}, false},
		{"limit", readpast.RetryingParams{Limit: 2}, []int64{d, e}, false},
		// The two that started last are D and B; E, which started first
		// and failed after them, is left unread.
		{"scan 2", readpast.RetryingParams{Scan: 2}, []int64{d, b}, true},
		{"scan 3", readpast.RetryingParams{Scan: 3}, []int64{d, b, a}, true},
		{"scan 4", readpast.RetryingParams{Scan: 4}, []int64{d, e, b, a}, false},
		{"scan 1 of a queue", readpast.RetryingParams{Queue: "ra", Scan: 1}, []int64{a}, true},
	}
	for _, tc := range cases {
		got, partial := list(tc.p)
		if !slices.Equal(got, tc.want) || partial != tc.partial {
			t.Errorf("%s: %v (partial %v), want %v (partial %v)", tc.name, got, partial, tc.want, tc.partial)
		}
	}
	// What a row shows: the latest error, the attempt, the next try.
	res := ok(in.Retrying(ctx, readpast.RetryingParams{})).must(t)
	byID := map[int64]*readpast.Job{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	for id, msg := range map[int64]string{a: "a failed", b: "b failed", e: "e failed"} {
		j := byID[id]
		if j == nil || j.Errors[len(j.Errors)-1].Message != msg || j.Attempt != 1 || !j.RunAt.Equal(later.Truncate(time.Microsecond)) {
			t.Errorf("job %d: %+v, want attempt 1 due at %v after %q", id, j, later, msg)
		}
	}
	if j := byID[d]; j == nil || !strings.Contains(j.Errors[0].Message, "lease") {
		t.Errorf("job %d (lease expired): %+v", d, j)
	}

	// Made due now (Store.Retry of a pending job), a retrying job is still
	// one; claimed, it is not.
	ok(s.Retry(ctx, a)).must(t)
	if got, _ := list(readpast.RetryingParams{Queue: "ra"}); !slices.Equal(got, []int64{e, a}) {
		t.Errorf("after making %d due: %v", a, got)
	}
	begin("ra", a, time.Minute)
	if got, _ := list(readpast.RetryingParams{Queue: "ra"}); !slices.Equal(got, []int64{e}) {
		t.Errorf("after claiming %d: %v", a, got)
	}

	for _, p := range []readpast.RetryingParams{
		{Limit: -1}, {Limit: 1001}, {Scan: -1}, {Scan: readpast.MaxRetryingScan + 1},
		{Queue: "two words"}, {Queue: strings.Repeat("q", readpast.MaxNameLen+1)},
	} {
		if _, err := in.Retrying(ctx, p); !errors.Is(err, readpast.ErrInvalid) {
			t.Errorf("retrying %+v: %v, want ErrInvalid", p, err)
		}
	}
}

// sameCounts reports whether a holds exactly the keys and values of want, a
// missing key counting as 0.
func sameCounts(a, want map[string]int64) bool {
	for k, v := range want {
		if a[k] != v {
			return false
		}
	}
	for k, v := range a {
		if want[k] != v {
			return false
		}
	}
	return true
}
