package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func putLimit(t *testing.T, s readpast.Store, l readpast.Limit) {
	t.Helper()
	if _, err := s.PutLimit(ctxT(t), l); err != nil {
		t.Fatalf("PutLimit(%+v): %v", l, err)
	}
}

func keyed(key string, n int) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: key}
	}
	return ps
}

// countKeys counts claimed jobs per key.
func countKeys(jobs []*readpast.Job) map[string]int {
	n := map[string]int{}
	for _, j := range jobs {
		n[groupName(j.Group)]++
	}
	return n
}

// testLimitsCRUD: limits are declared, replaced, read, listed and deleted;
// bad input is refused and changes nothing.
func testLimitsCRUD(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for _, bad := range []readpast.Limit{
		{Key: "", Concurrency: 1},
		{Key: "a*b", Concurrency: 1},
		{Key: "a b", Concurrency: 1},
		{Key: "k", Concurrency: -1},
		{Key: "k", Concurrency: readpast.MaxConcurrency + 1},
		{Key: "k", Rate: -1},
		{Key: "k", Concurrency: 1, Per: time.Second},
		{Key: "k", Rate: 1, Per: -time.Second},
		{Key: "k", Rate: 1, Per: 48 * time.Hour},
		{Key: "k", Rate: 2_000_000, Per: time.Second},
		{Key: "k", Rate: 1, Burst: -1},
		{Key: "k", Concurrency: 1, Weight: -1},
		{Key: "k", Concurrency: 1, Weight: readpast.MaxWeight + 1},
	} {
		if _, err := s.PutLimit(ctx, bad); !errors.Is(err, readpast.ErrInvalid) {
			t.Errorf("PutLimit(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if ls, err := s.ListLimits(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("after refused puts ListLimits = %v, %v; want none", ls, err)
	}
	created, err := s.PutLimit(ctx, readpast.Limit{Key: "customer:*", Concurrency: 5, Rate: 10})
	if err != nil || !created {
		t.Fatalf("PutLimit = %v, %v; want created", created, err)
	}
	created, err = s.PutLimit(ctx, readpast.Limit{Key: "customer:*", Concurrency: 3, Rate: 10, Per: time.Minute, Burst: 2, Weight: 3})
	if err != nil || created {
		t.Fatalf("replacing PutLimit = %v, %v; want not created", created, err)
	}
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 0, Rate: 1})
	putLimit(t, s, readpast.Limit{Key: "heavy", Weight: 4}) // a weight alone: no bound on concurrency
	got, err := s.GetLimit(ctx, "customer:*")
	if err != nil {
		t.Fatal(err)
	}
	want := readpast.Limit{Key: "customer:*", Concurrency: 3, Rate: 10, Per: time.Minute, Burst: 2, Weight: 3}
	if got.Limit != want {
		t.Fatalf("GetLimit = %+v, want %+v", got.Limit, want)
	}
	ls, err := s.ListLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range ls {
		keys = append(keys, l.Key)
	}
	if fmt.Sprint(keys) != "[api customer:* heavy]" {
		t.Fatalf("ListLimits keys = %v", keys)
	}
	if ls[0].Limit != (readpast.Limit{Key: "api", Rate: 1, Per: time.Second, Burst: 1, Weight: 1}) {
		t.Fatalf("defaults filled: %+v", ls[0].Limit)
	}
	if ls[2].Limit != (readpast.Limit{Key: "heavy", Weight: 4}) {
		t.Fatalf("a weight alone: %+v", ls[2].Limit)
	}
	if _, err := s.GetLimit(ctx, "customer:42"); !errors.Is(err, readpast.ErrLimitNotFound) {
		t.Fatalf("GetLimit of a key a template governs = %v, want ErrLimitNotFound (only declared keys)", err)
	}
	if err := s.DeleteLimit(ctx, "customer:*"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLimit(ctx, "customer:*"); !errors.Is(err, readpast.ErrLimitNotFound) {
		t.Fatalf("second DeleteLimit = %v, want ErrLimitNotFound", err)
	}
	if _, err := s.GetLimit(ctx, "customer:*"); !errors.Is(err, readpast.ErrLimitNotFound) {
		t.Fatalf("GetLimit after delete = %v", err)
	}
}

// testLimitTemplates: every key a template matches gets a bucket of its
// own; a key's own limit overrides its template, and the longest template
// wins over a shorter one; a key no limit matches runs one at a time.
func testLimitTemplates(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 2})
	putLimit(t, s, readpast.Limit{Key: "c:vip:*", Concurrency: 4})
	putLimit(t, s, readpast.Limit{Key: "c:7", Concurrency: 3})
	for _, k := range []string{"c:1", "c:2", "c:7", "c:vip:1", "other"} {
		enqueue(t, s, keyed(k, 6)...)
	}
	got := countKeys(claim(t, s, 100, time.Minute))
	want := map[string]int{"c:1": 2, "c:2": 2, "c:7": 3, "c:vip:1": 4, "other": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claimed per key %v, want %v", got, want)
	}
	// Raising a template applies to the keys it governs at their next
	// starts (c:7 has a limit of its own and keeps it).
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 3})
	got = countKeys(claim(t, s, 100, time.Minute))
	want = map[string]int{"c:1": 1, "c:2": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after raising the template claimed %v, want %v", got, want)
	}
	// Deleting a key's own limit leaves it to its template.
	if err := s.DeleteLimit(ctx, "c:vip:*"); err != nil {
		t.Fatal(err)
	}
	info, err := s.GetLimit(ctx, "c:*")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]readpast.KeyState{}
	for _, k := range info.Keys {
		states[k.Key] = k
	}
	if k := states["c:vip:1"]; k.Running != 4 || k.Concurrency != 3 || k.Limit != "c:*" {
		t.Fatalf("c:vip:1 after its template went: %+v (keys %+v)", k, info.Keys)
	}
	if k := states["c:1"]; k.Running != 3 || k.Concurrency != 3 || k.Tokens != -1 {
		t.Fatalf("c:1: %+v", k)
	}
	if _, ok := states["c:7"]; ok {
		t.Fatalf("c:7 listed under c:* though it has its own limit: %+v", info.Keys)
	}
	if more := claim(t, s, 100, time.Minute); len(more) != 0 {
		t.Fatalf("claimed %v from keys at or over their limits", ids(more))
	}
}

// testRateLimit: a key's starts follow its rate: Burst at once, then one
// per interval; a key out of tokens holds back nothing else; a retry is a
// start of its own; raising the burst applies at once.
func testRateLimit(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "slow", Rate: 1, Per: time.Hour, Burst: 3})
	jobs := enqueue(t, s, keyed("slow", 6)...)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k"}, readpast.EnqueueParams{Kind: "k", Group: "g"})
	c := claim(t, s, 100, time.Minute)
	if n := countKeys(c); n["slow"] != 3 || n["-"] != 1 || n["g"] != 1 || len(c) != 5 {
		t.Fatalf("first claim took %v, want the burst of 3 and the two others", n)
	}
	if c := claim(t, s, 100, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v with no token left", ids(c))
	}
	// Concurrency is unbounded (0): completing frees nothing a rate holds.
	for _, j := range c {
		if err := completeOne(ctx, s, j, ""); err != nil {
			t.Fatal(err)
		}
	}
	if c := claim(t, s, 100, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v after completions with no token left", ids(c))
	}
	wantState(t, s, jobs[3].ID, readpast.StatePending)
	// TakeTokens draws on the same bucket.
	g, err := s.TakeTokens(ctx, "slow", 1)
	if err != nil {
		t.Fatal(err)
	}
	if g.Granted || time.Until(g.RetryAt) < 50*time.Minute || time.Until(g.RetryAt) > 61*time.Minute {
		t.Fatalf("TakeTokens on an empty bucket = %+v, want refused until about an hour from now", g)
	}
	// A higher burst gives tokens at once: 5 minus the 3 taken... from
	// a bucket whose next start is an hour ahead: 5 - 3 = 2.
	putLimit(t, s, readpast.Limit{Key: "slow", Rate: 1, Per: time.Hour, Burst: 5})
	if c := claim(t, s, 100, time.Minute); len(c) != 2 {
		t.Fatalf("after raising the burst to 5 claimed %d, want 2", len(c))
	}
}

// testRateRefills: tokens come back one per interval, on the clock.
func testRateRefills(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "r", Rate: 1, Per: 1500 * time.Millisecond, Burst: 1})
	enqueue(t, s, keyed("r", 3)...)
	first := time.Now()
	if c := claim(t, s, 10, time.Minute); len(c) != 1 {
		t.Fatalf("claimed %d, want 1", len(c))
	}
	c := claim(t, s, 10, time.Minute)
	if len(c) != 0 && time.Since(first) < time.Second {
		t.Fatalf("claimed %v within a second of the last start at 1 per 1.5 s", ids(c))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(c) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		c = claim(t, s, 10, time.Minute)
	}
	if len(c) != 1 {
		t.Fatalf("claimed %d after waiting, want 1", len(c))
	}
	if d := time.Since(first); d < 1400*time.Millisecond {
		t.Fatalf("second start %s after the first, want at least 1.5 s (less the clocks' jitter)", d)
	}
}

// testRetrySpendsAToken: the next attempt of a failed job is a start and
// needs a token, though its slot is free.
func testRetrySpendsAToken(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	putLimit(t, s, readpast.Limit{Key: "once", Concurrency: 1, Rate: 1, Per: time.Hour, Burst: 1})
	enqueue(t, s, keyed("once", 1)...)
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 {
		t.Fatalf("claimed %d", len(c))
	}
	if err := failOne(ctx, s, readpast.Failure{ID: c[0].ID, Token: c[0].Token, Message: "x", RetryAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, c[0].ID, readpast.StatePending)
	if again := claim(t, s, 10, time.Minute); len(again) != 0 {
		t.Fatalf("the retry started with no token: %v", ids(again))
	}
	// A stale token's write changes nothing, and frees no slot.
	if err := completeOne(ctx, s, c[0], ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale completion = %v", err)
	}
}

// testTakeTokens: tokens outside jobs, all or none.
func testTakeTokens(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if g, err := s.TakeTokens(ctx, "nolimit", 5); err != nil || !g.Granted {
		t.Fatalf("TakeTokens on a key without a rate = %+v, %v; want granted", g, err)
	}
	putLimit(t, s, readpast.Limit{Key: "t:*", Rate: 2, Per: time.Hour, Burst: 3})
	for _, bad := range []int{0, -1, readpast.MaxTakeTokens + 1} {
		if _, err := s.TakeTokens(ctx, "t:1", bad); !errors.Is(err, readpast.ErrInvalid) {
			t.Fatalf("TakeTokens n=%d = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := s.TakeTokens(ctx, "t:1", 4); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("TakeTokens of more than the burst = %v, want ErrInvalid (never grantable)", err)
	}
	if g, err := s.TakeTokens(ctx, "t:1", 2); err != nil || !g.Granted {
		t.Fatalf("TakeTokens 2 of 3 = %+v, %v", g, err)
	}
	g, err := s.TakeTokens(ctx, "t:1", 2)
	if err != nil || g.Granted {
		t.Fatalf("TakeTokens 2 of the 1 left = %+v, %v; want refused", g, err)
	}
	// One token comes back every 30 minutes: two are there in 30.
	if d := time.Until(g.RetryAt); d < 25*time.Minute || d > 31*time.Minute {
		t.Fatalf("RetryAt in %s, want about 30 minutes", d)
	}
	if g, err := s.TakeTokens(ctx, "t:1", 1); err != nil || !g.Granted {
		t.Fatalf("TakeTokens the last one = %+v, %v", g, err)
	}
	if g, _ := s.TakeTokens(ctx, "t:2", 3); !g.Granted {
		t.Fatal("t:2 shares t:1's bucket")
	}
	// Jobs of the key find the bucket empty.
	enqueue(t, s, keyed("t:1", 1)...)
	if c := claim(t, s, 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v from a key whose tokens TakeTokens took", ids(c))
	}
	info, err := s.GetLimit(ctx, "t:*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range info.Keys {
		if k.Tokens != 0 || k.NextStart.IsZero() {
			t.Fatalf("key state %+v, want no tokens and a next start", k)
		}
	}
	if len(info.Keys) != 2 {
		t.Fatalf("keys %+v, want t:1 and t:2", info.Keys)
	}
}

// testRateLimitsUnderStress: eight claimers drain keys with rates (one
// declared by a template), failing one attempt in five so that retries
// start again. For every key, over every span between two of its starts
// (the started_at the claims recorded, the clock the rate is kept on),
// the starts never exceed span/interval + burst.
func testRateLimitsUnderStress(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	limits := []readpast.Limit{
		{Key: "k0", Concurrency: 4, Rate: 200, Burst: 3},
		{Key: "k1", Rate: 100, Burst: 1},
		{Key: "t:*", Concurrency: 2, Rate: 50, Burst: 2},
	}
	for _, l := range limits {
		putLimit(t, s, l)
	}
	keys := map[string]readpast.Limit{"k0": limits[0], "k1": limits[1], "t:0": limits[2], "t:1": limits[2], "t:2": limits[2]}
	var ps []readpast.EnqueueParams
	for k := range keys {
		ps = append(ps, keyed(k, 60)...)
	}
	ps = append(ps, make5("free")...)
	enqueue(t, s, ps...)
	var (
		mu     sync.Mutex
		starts = map[string][]time.Time{}
		done   atomic.Int64
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(30 * time.Second)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(len(ps)) && time.Now().Before(deadline) {
				jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", w), Limit: 5, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					starts[groupName(j.Group)] = append(starts[groupName(j.Group)], *j.StartedAt)
				}
				mu.Unlock()
				for _, j := range jobs {
					if j.Attempt == 1 && j.ID%5 == 0 {
						if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "again", RetryAt: time.Now().Add(-time.Second)}); err != nil {
							t.Error(err)
						}
						continue
					}
					if err := completeOne(ctx, s, j, ""); err != nil {
						t.Error(err)
					}
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := done.Load(); n != int64(len(ps)) {
		t.Fatalf("%d of %d jobs done in 30 s", n, len(ps))
	}
	for k, l := range keys {
		ts := starts[k]
		slices.SortFunc(ts, time.Time.Compare)
		l, err := l.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		iv, burst := l.Interval(), l.Burst
		for i := range ts {
			for j := i + burst; j < len(ts); j++ {
				span := ts[j].Sub(ts[i])
				if allowed := int(span/iv) + burst; j-i+1 > allowed {
					t.Fatalf("key %s: %d starts within %s (rate %d/s, burst %d allows %d)", k, j-i+1, span, l.Rate, burst, allowed)
				}
				if span > 2*time.Second {
					break
				}
			}
		}
	}
}
