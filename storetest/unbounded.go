package storetest

import (
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testLimitWithoutBound: a limit that sets nothing but its key lets the
// keys it governs run any number of jobs at once; every exit of an
// attempt (completion, failure with a retry, release) lowers the key's
// running count; a bound given later counts every job still running, so
// the keys start exactly up to it; deleting the limit leaves the keys to
// the default of one at a time.
func testLimitWithoutBound(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "n:*"})
	info := ok(s.GetLimit(ctx, "n:*")).must(t)
	if info.Concurrency != 0 || info.Rate != 0 || info.Weight != 1 {
		t.Fatalf("GetLimit(n:*) = %+v, want no bound, no rate, weight 1", info)
	}
	enqueue(t, s, keyed("n:1", 6)...)
	enqueue(t, s, keyed("n:2", 6)...)
	got := claim(t, s, 100, time.Minute)
	if c := countKeys(got); c["n:1"] != 6 || c["n:2"] != 6 {
		t.Fatalf("claimed per key %v, want all 6 of each", c)
	}
	byKey := map[string][]*readpast.Job{}
	for _, j := range got {
		byKey[*j.Group] = append(byKey[*j.Group], j)
	}
	for _, j := range byKey["n:1"][:3] {
		if err := completeOne(ctx, s, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := failOne(ctx, s, readpast.Failure{ID: byKey["n:2"][0].ID, Token: byKey["n:2"][0].Token,
		Message: "again", RetryAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, byKey["n:2"][1].ID, byKey["n:2"][1].Token); err != nil {
		t.Fatal(err)
	}
	wantRunning(t, s, "after 3 completions", "n:*", "n:1", 3)
	wantRunning(t, s, "after a failure and a release", "n:*", "n:2", 4)
	// A bound of 4: n:1 (3 running) may start one more, n:2 (4 running,
	// 2 pending again) none.
	putLimit(t, s, readpast.Limit{Key: "n:*", Concurrency: 4})
	wantRunning(t, s, "once bounded", "n:*", "n:1", 3)
	wantRunning(t, s, "once bounded", "n:*", "n:2", 4)
	if more := countKeys(claim(t, s, 100, time.Minute)); len(more) != 0 {
		t.Fatalf("claimed %v from keys with nothing pending or full", more)
	}
	enqueue(t, s, keyed("n:1", 3)...)
	if more := countKeys(claim(t, s, 100, time.Minute)); more["n:1"] != 1 || more["n:2"] != 0 {
		t.Fatalf("claimed %v, want one job of n:1 (3 of 4 running) and none of n:2 (4 of 4)", more)
	}
	if err := completeOne(ctx, s, byKey["n:2"][2], ""); err != nil {
		t.Fatal(err)
	}
	if more := countKeys(claim(t, s, 100, time.Minute)); more["n:2"] != 1 || more["n:1"] != 0 {
		t.Fatalf("claimed %v, want one job of n:2, which freed a slot", more)
	}
	// Without the limit, the keys run one at a time: nothing starts.
	if err := s.DeleteLimit(ctx, "n:*"); err != nil {
		t.Fatal(err)
	}
	if err := completeOne(ctx, s, byKey["n:1"][3], ""); err != nil {
		t.Fatal(err)
	}
	if more := claim(t, s, 100, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %v from keys over the default of one at a time", ids(more))
	}
}
