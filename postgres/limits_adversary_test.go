package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Replays of attacks on the promises of limits per key
// (docs/design/flow-control.md), more in limits_adversary_wakes_test.go.
// Each test fails while the promise it names is broken; where a subtest
// is named as the control, it is the same sequence without the one step
// that breaks the promise.

// advRateOver describes the span of starts that exceeds most what
// interval and burst allow (over a span T, at most T/interval + burst),
// or returns "" when none does.
func advRateOver(starts []time.Time, interval time.Duration, burst int) string {
	s := slices.Clone(starts)
	slices.SortFunc(s, time.Time.Compare)
	worst, out := 0.0, ""
	for i := range s {
		for j := i; j < len(s); j++ {
			d := s[j].Sub(s[i])
			allowed := float64(d)/float64(interval) + float64(burst)
			if n := j - i + 1; float64(n)-allowed > worst {
				worst = float64(n) - allowed
				out = fmt.Sprintf("%d starts within %v, at most %.2f allowed (interval %v, burst %d)", n, d, allowed, interval, burst)
			}
		}
	}
	return out
}

func advStartedAt(jobs ...[]*readpast.Job) []time.Time {
	var out []time.Time
	for _, js := range jobs {
		for _, j := range js {
			out = append(out, *j.StartedAt)
		}
	}
	return out
}

// TestAdversaryPrunedRowRefillsAtAnEarlierClaimsTime: the claim reads its
// clock (claim_time, the jobs' started_at and the bucket's "now") before
// it locks or creates key rows. A claim whose snapshot shows no row for
// the key reads its clock at t1 and is delayed; meanwhile another claim
// creates the row and takes the whole burst at t2 > t1, its jobs end, and
// PruneGroups deletes the row once tat is past (on the pruner's clock).
// The first claim then creates the row with a full bucket judged at t1,
// and takes the burst again: 2 × burst jobs with started_at within
// t2 - t1, far less than the burst's interval.
func TestAdversaryPrunedRowRefillsAtAnEarlierClaimsTime(t *testing.T) {
	for _, prune := range []bool{false, true} { // without the prune: the control, which passes
		t.Run(fmt.Sprintf("prune=%v", prune), func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			defer s.Close()
			const interval, burst = time.Second, 2
			putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: interval, Burst: burst})
			keyJobs(t, s, "api", "qa", 4)

			slow := newStall(t, s, "claim.group_rows")
			var got1 []*readpast.Job
			done1 := stalledClaimQA(t, slow, 10, &got1) // its clock read, its snapshot: no row for api

			// Two jobs ahead of the others (a key is one ordered stream),
			// which the first claim's snapshot does not show, with a mark
			// it does not hold.
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
				{Kind: "k", Queue: "qb", Group: "api", Priority: -1}, {Kind: "k", Queue: "qb", Group: "api", Priority: -1}}); err != nil {
				t.Fatal(err)
			}
			got2 := claimWithin(t, "a second claim", time.Second, s, claimQ("second", 10, "qb"))
			if len(got2) != burst {
				t.Fatalf("the second claim took %d, want the burst of %d", len(got2), burst)
			}
			for _, j := range got2 {
				if err := first(s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(burst*interval + 200*time.Millisecond) // tat past: the row is idle
			if prune {
				// A row with no turn to keep (as one TakeTokens created)
				// is pruned though the key has jobs waiting.
				if _, err := s.Pool().Exec(ctx, "UPDATE readpast_groups SET served_at = NULL"); err != nil {
					t.Fatal(err)
				}
				if n, err := s.PruneGroups(ctx, 100); err != nil || n != 1 {
					t.Fatalf("PruneGroups = %d, %v; want api's row", n, err)
				}
			}
			slow.open()
			within(t, "the first claim", 2*time.Second, done1)
			if over := advRateOver(advStartedAt(got1, got2), interval, burst); over != "" {
				t.Errorf("key api (rate 1/s, burst 2): %s; first claim %d jobs at %v, second %d at %v",
					over, len(got1), advStartedAtStrings(got1), len(got2), advStartedAtStrings(got2))
			}
		})
	}
}

// TestAdversaryRaisedLimitAppliesToEarlierStarts: the same clock read
// early. A claim reads its clock at t1 and is delayed before the key's
// row; the key's burst is raised and PutLimit returns; the claim then
// starts jobs under the new burst with started_at t1, before the change
// began: the starts before the change (by started_at) exceed the limit
// then in force.
func TestAdversaryRaisedLimitAppliesToEarlierStarts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 1})
	if g, err := s.TakeTokens(ctx, "api", 1); err != nil || !g.Granted { // api's row, its one token taken
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	keyJobs(t, s, "api", "qa", 4)
	claimer := newStall(t, s, "claim.group_rows")
	var got []*readpast.Job
	done := stalledClaimQA(t, claimer, 10, &got)
	var changeBegan time.Time
	if err := s.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&changeBegan); err != nil {
		t.Fatal(err)
	}
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 4})
	claimer.open()
	within(t, "the claim", 2*time.Second, done)
	for _, j := range got {
		if j.StartedAt.Before(changeBegan) {
			t.Errorf("job %d started at %v under the raised burst, %v before PutLimit began; the limit then allowed no start (rate 1/h, burst 1, its token taken)",
				j.ID, j.StartedAt.Format(time.StampMicro), changeBegan.Sub(*j.StartedAt))
		}
	}
}

func advStartedAtStrings(jobs []*readpast.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.StartedAt.Format(time.StampMicro))
	}
	return out
}

// TestAdversaryIntervalTruncatedToMicroseconds: a rate is stored as the
// time between two starts in whole microseconds, truncated
// (Limit.Interval().Microseconds()): Rate 1,000,000 per 1.999999 s is an
// interval of 1.999999 µs, stored as 1 µs, so the bucket refills twice
// as fast as declared. Two takes of the whole burst 1 s apart are both
// granted: 2,000,000 starts in about a second where Rate*T/Per + Burst
// allows about 1,500,000.
func TestAdversaryIntervalTruncatedToMicroseconds(t *testing.T) {
	// Per 2 s: an interval of exactly 2 µs, the control, which passes.
	for _, per := range []time.Duration{2 * time.Second, 1_999_999 * time.Microsecond} {
		t.Run("per="+per.String(), func(t *testing.T) { advTruncation(t, per) })
	}
}

func advTruncation(t *testing.T, per time.Duration) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	const rate = 1_000_000
	putLimit(t, s, readpast.Limit{Key: "fast", Rate: rate, Per: per}) // burst: the rate
	clock := func() time.Time {
		var at time.Time
		if err := s.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	began := clock()
	g, err := s.TakeTokens(ctx, "fast", rate)
	if err != nil || !g.Granted {
		t.Fatalf("first TakeTokens of the burst = %+v, %v", g, err)
	}
	g, err = s.TakeTokens(ctx, "fast", rate)
	if err != nil || g.Granted {
		t.Fatalf("second TakeTokens at once = %+v, %v; want refused", g, err)
	}
	if d := g.RetryAt.Sub(began); d < per {
		t.Logf("RetryAt is %v after the first take; the declared rate needs %v to refill the burst", d, per)
	}
	time.Sleep(time.Until(g.RetryAt) + 50*time.Millisecond)
	g, err = s.TakeTokens(ctx, "fast", rate)
	if err != nil {
		t.Fatal(err)
	}
	span := clock().Sub(began)
	allowed := float64(rate)*span.Seconds()/per.Seconds() + rate
	if g.Granted && 2*rate > allowed {
		t.Errorf("rate %d per %v, burst %d: %d starts granted within %v, at most %.0f allowed", rate, per, rate, 2*rate, span, allowed)
	}
}

// TestAdversaryRaisedRateWaitsOutTheOldInterval: a limit change keeps the
// key's tat, a time computed with the old interval. A key limited to one
// start an hour, which started once, has its rate raised to 10 a second
// (burst 1): the new limit allows a start 100 ms later, but the bucket
// refuses every start until the old hour is over. The change does not
// apply to the starts that follow it (with MaxPer, for up to a day).
func TestAdversaryRaisedRateWaitsOutTheOldInterval(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 1})
	if g, err := s.TakeTokens(ctx, "api", 1); err != nil || !g.Granted {
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 10, Per: time.Second, Burst: 1})
	time.Sleep(300 * time.Millisecond) // three intervals of the new rate
	advEnqueueKey(t, s, "api", 1)
	got := mustClaim(t, s, "w", 10)
	g, err := s.TakeTokens(ctx, "api", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 && !g.Granted {
		t.Errorf("300 ms after api's rate was raised to 10/s (burst 1), with one start before the change: the claim took nothing and TakeTokens was refused until %v (%v from now)",
			g.RetryAt.Format(time.StampMilli), time.Until(g.RetryAt).Round(time.Second))
	}
}

// advClient runs a client on s over the default queue, 10 workers, whose
// handler records each job's StartedAt by key and then holds the job
// until the test ends (no completion wakes anyone).
type advClient struct {
	mu     sync.Mutex
	starts map[string][]time.Time
}

func startAdvClient(t *testing.T, s *postgres.Store, poll time.Duration) *advClient {
	t.Helper()
	a := &advClient{starts: map[string][]time.Time{}}
	release := make(chan struct{})
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
		a.mu.Lock()
		a.starts[*j.Group] = append(a.starts[*j.Group], *j.StartedAt)
		a.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{
		Workers:          w,
		PollInterval:     poll,
		Queues:           map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 10, FetchLimit: 10}},
		RescueInterval:   -1,
		ScheduleInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return a
}

func (a *advClient) count(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.starts[key])
}

// waitListening returns once n sessions of s's database are in LISTEN.
func advWaitListening(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := s.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN readpast' AND datname = current_database()").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions listening, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func advEnqueueKey(t *testing.T, s *postgres.Store, key string, n int) {
	t.Helper()
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: key}
	}
	if _, err := s.Enqueue(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
}

// waitStarts waits up to d for key to have n starts and reports how many
// it had.
func (a *advClient) waitStarts(key string, n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if a.count(key) >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return a.count(key)
}

// TestAdversaryNextStartWithinDueSoonWakesNobody: a claim that leaves a
// key out of tokens announces the key's next start ("due:" NOTIFY), and
// every store sets an alarm for it, except for times within dueSoon (20
// ms) of when it hears them (due.go dueAt), and heardDue never wakes the
// claimers for a "due:" payload. A key of rate 100/s (10 ms between
// starts) always has its next start within 20 ms: no alarm is ever set,
// and workers that poll every 30 s start one job and wait for the poll.
func TestAdversaryNextStartWithinDueSoonWakesNobody(t *testing.T) {
	for _, rate := range []int{10, 100} { // 10/s, next start 100 ms ahead: the control, which passes
		t.Run(fmt.Sprintf("rate=%d", rate), func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() }) // after the client stops
			putLimit(t, s, readpast.Limit{Key: "api", Rate: rate, Per: time.Second, Burst: 1})
			c := startAdvClient(t, s, 30*time.Second)
			advWaitListening(t, s, 1)
			advEnqueueKey(t, s, "api", 5)
			// 5 starts: 400 ms at 10/s, 40 ms at 100/s; give it 3 s.
			if n := c.waitStarts("api", 5, 3*time.Second); n < 5 {
				t.Errorf("workers polling every 30 s started %d of 5 jobs of a key of rate %d/s in 3 s: its next start, %v ahead, woke nobody",
					n, rate, time.Second/time.Duration(rate))
			}
		})
	}
}

// TestAdversaryLaterKeysNextStartNotAnnounced: a claim that leaves several
// keys out of tokens announces only the earliest of their next starts
// (claim.sql, wake: min(run_at)). Key a's next start comes in 300 ms, key
// b's in 2 s; the alarm for a's wakes a claim that takes a's job and holds
// nothing of b (b's mark is not due), so b's next start is never
// announced: workers polling every 30 s do not start b's job at 2 s.
func TestAdversaryLaterKeysNextStartNotAnnounced(t *testing.T) {
	for _, withA := range []bool{false, true} { // b alone: the control, which passes
		t.Run(fmt.Sprintf("a=%v", withA), func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() }) // after the client stops
			putLimit(t, s, readpast.Limit{Key: "a", Rate: 1, Per: 300 * time.Millisecond, Burst: 1})
			putLimit(t, s, readpast.Limit{Key: "b", Rate: 1, Per: 2 * time.Second, Burst: 1})
			c := startAdvClient(t, s, 30*time.Second)
			advWaitListening(t, s, 1)
			ps := []readpast.EnqueueParams{{Kind: "k", Group: "b"}, {Kind: "k", Group: "b"}}
			if withA {
				ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "a"}, readpast.EnqueueParams{Kind: "k", Group: "a"})
			}
			if _, err := s.Enqueue(context.Background(), ps); err != nil {
				t.Fatal(err)
			}
			if withA {
				if n := c.waitStarts("a", 2, 2*time.Second); n != 2 {
					t.Fatalf("key a (one start per 300 ms) started %d of 2 in 2 s", n)
				}
			}
			if n := c.waitStarts("b", 2, 4*time.Second); n != 2 {
				t.Errorf("key b (one start per 2 s) started %d of 2 in 4 s or more with workers polling every 30 s: its next start was never announced", n)
			}
		})
	}
}

// TestAdversaryRestartedProcessMissesThrottledKeys: a store that starts
// listening (a process started or restarted, a listener reconnected)
// sets alarms for the due times it missed from due_upcoming.sql, which
// reads the run_at of pending jobs only. A key out of tokens has its next
// start in a ready mark, announced once by the claim that throttled it:
// a process that was not listening then never wakes for it. Here process
// A claims a key's first job (next start in 2 s) and goes away; process
// B's workers, polling every 30 s, do not start the second job at 2 s.
func TestAdversaryRestartedProcessMissesThrottledKeys(t *testing.T) {
	ctx := context.Background()
	a := newStore(t)
	t.Cleanup(func() { a.Close() })
	putLimit(t, a, readpast.Limit{Key: "api", Rate: 1, Per: 2 * time.Second, Burst: 1})
	advEnqueueKey(t, a, "api", 2)
	got, err := a.Claim(ctx, readpast.ClaimParams{Worker: "a", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("process A claimed %v, %v; want api's first job", got, err)
	}
	b, err := postgres.Open(ctx, a.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := startAdvClient(t, b, 30*time.Second)
	advWaitListening(t, a, 1)
	if n := c.waitStarts("api", 1, 4*time.Second); n != 1 {
		t.Errorf("process B, started while api was out of tokens (next start 2 s after A's claim), started %d of its jobs in 4 s with workers polling every 30 s", n)
	}
}

// TestAdversaryLimitChangeStallsUnrelatedNewKeys: PutLimit holds the
// limits' lock exclusively from its first statement to its commit, and
// in between waits for the rows of the keys it governs. A caller's open
// CompleteTx holds key x's row; PutLimit of x waits for it, and all the
// while every claim passes over every key that has no row (new keys, and
// any key PruneGroups emptied), whatever its limit: a job of key y, which
// has nothing to do with x and has a free slot, does not start.
func TestAdversaryLimitChangeStallsUnrelatedNewKeys(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	keyJobs(t, s, "x", "default", 1)
	held := mustClaim(t, s, "w", 1)
	if len(held) != 1 {
		t.Fatalf("claimed %v, want x's job", held)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: held[0].ID, Token: held[0].Token}); err != nil {
		t.Fatal(err)
	}
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "x", Concurrency: 2})
		return err
	})
	advWaitRowWaiter(t, s)
	keyJobs(t, s, "y", "default", 1)
	got := claimWithin(t, "a claim while PutLimit(x) waits for x's row", time.Second, s, claimP("w2", 10))
	if len(got) != 1 {
		t.Errorf("a claim took %d jobs; want y's (y has no limit and nothing running): PutLimit of x, waiting for a transaction holding x's row, keeps every key without a row from starting", len(got))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit", 2*time.Second, put)
}

// waitRowWaiter returns once a session waits for a lock held by another
// transaction (a row lock: its transaction id).
func advWaitRowWaiter(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype IN ('transactionid', 'tuple')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nobody waits for a row")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// isoStore opens another store on base's database whose sessions default
// to isolation iso (default_transaction_isolation, which an operator may
// set per database or role; the claim copes with it, claimiso.go).
func advIsoStore(t *testing.T, base *postgres.Store, iso string) *postgres.Store {
	t.Helper()
	u, err := url.Parse(base.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_transaction_isolation", iso)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	st, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitLimitsLockWaiter returns once a session waits for the limits' lock
// (advisory 1919181686, 0).
func advWaitLimitsLockWaiter(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid = 1919181686 AND objid = 0 AND objsubid = 2`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nobody waits for the limits' lock")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// advIsolations are the session default isolations the two tests below
// run PutLimit and TakeTokens in: READ COMMITTED is the control (it
// passes), REPEATABLE READ breaks.
var advIsolations = []string{"read committed", "repeatable read"}

// TestAdversaryRepeatableReadPutLimitMissesARowBeingCreated: PutLimit
// (changeLimits) runs in a transaction of the pool's default isolation.
// Its lock statement waits for a claim that is creating a key's row;
// under READ COMMITTED the next statement's snapshot shows that row. In a
// store whose sessions default to REPEATABLE READ (an operator's
// default_transaction_isolation, which the claim copes with, claimiso.go)
// every statement reads the snapshot of the lock statement, taken before
// the claim committed: apply_limit does not see the row, and the key
// keeps its old limit after PutLimit returned
// (TestLimitChangeWaitsForARowBeingCreated in REPEATABLE READ).
func TestAdversaryRepeatableReadPutLimitMissesARowBeingCreated(t *testing.T) {
	for _, iso := range advIsolations {
		t.Run(iso, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			defer s.Close()
			putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
			keyJobs(t, s, "c:1", "qa", 3)
			other := advIsoStore(t, s, iso)
			claimer := newStall(t, s, "claim.end")
			var got []*readpast.Job
			done := stalledClaimQA(t, claimer, 10, &got) // c:1's row created, limit 1, not committed
			put := async(func() error {
				_, err := other.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 3})
				return err
			})
			advWaitLimitsLockWaiter(t, s)
			claimer.open()
			within(t, "the claim", 2*time.Second, done)
			within(t, "PutLimit", 2*time.Second, put)
			info, err := s.GetLimit(ctx, "c:*")
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Keys) != 1 || info.Keys[0].Concurrency != 3 {
				t.Errorf("%s: keys of c:* after PutLimit(concurrency 3) returned: %+v, want c:1 with concurrency 3", iso, info.Keys)
			}
			if more := claimWithin(t, "a claim after", time.Second, s, claimQ("after", 10, "qa")); len(more) != 2 {
				t.Errorf("%s: after PutLimit(c:*, concurrency 3) claimed %d more of c:1 (1 running), want 2", iso, len(more))
			}
		})
	}
}

// TestAdversaryRepeatableReadTakeTokensCreatesARowWithoutTheLimit:
// TakeTokens also runs in the pool's default isolation. Its first
// statement waits for the limits' lock that a PutLimit holds; under
// REPEATABLE READ readpast_key_limit then reads the limits in the snapshot
// of that first statement, from before PutLimit committed, and creates
// the key's row without the limit. The key then has no rate at all:
// every TakeTokens is granted, and its jobs start without a rate, until
// the next change of its limit or the row's prune.
func TestAdversaryRepeatableReadTakeTokensCreatesARowWithoutTheLimit(t *testing.T) {
	for _, iso := range advIsolations {
		t.Run(iso, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			defer s.Close()
			other := advIsoStore(t, s, iso)
			setter := newStall(t, s, "limit.put")
			set := async(func() error {
				_, err := setter.store.PutLimit(ctx, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 1})
				return err
			})
			setter.waitBlocked() // the limits' lock held, the limit not yet written
			var g1 readpast.TokenGrant
			took := async(func() error {
				var err error
				g1, err = other.TakeTokens(ctx, "api", 1)
				return err
			})
			advWaitLimitsLockWaiter(t, s)
			setter.open()
			within(t, "PutLimit", 2*time.Second, set)
			within(t, "TakeTokens", 2*time.Second, took)
			granted := 0
			if g1.Granted {
				granted++
			}
			for range 3 {
				g, err := s.TakeTokens(ctx, "api", 1)
				if err != nil {
					t.Fatal(err)
				}
				if g.Granted {
					granted++
				}
			}
			if granted > 1 {
				info, _ := s.GetLimit(ctx, "api")
				t.Errorf("%s: api (rate 1/h, burst 1, declared before the first take was granted): %d of 4 takes granted at once; keys under api's limit: %+v", iso, granted, info.Keys)
			}
		})
	}
}

// TestAdversarySetGroupLimitDropsAConcurrentRate: SetGroupLimit reads the
// group's limit (GetLimit), then writes it back with the new concurrency
// (PutLimit) in another transaction, outside the limits' lock. A PutLimit
// that declares a rate for the group between the two is undone: the
// group's rate is gone although SetGroupLimit promises to keep it.
func TestAdversarySetGroupLimitDropsAConcurrentRate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	setter := newStall(t, s, "limit.put")
	set := async(func() error {
		_, err := setter.store.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 2, Rate: 1, Per: time.Hour, Burst: 1})
		return err
	})
	setter.waitBlocked() // the rate's PutLimit holds the limits' lock
	group := async(func() error { return s.SetGroupLimit(ctx, "g", 5) })
	advWaitLimitsLockWaiter(t, s) // SetGroupLimit read the limit, and waits to write it
	setter.open()
	within(t, "PutLimit", 2*time.Second, set)
	within(t, "SetGroupLimit", 2*time.Second, group)
	l, err := s.GetLimit(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if l.Rate != 1 || l.Concurrency != 5 {
		t.Errorf("g's limit after PutLimit(rate 1/h) and SetGroupLimit(g, 5) both returned: %+v; want concurrency 5 and the rate kept", l.Limit)
	}
}

// TestAdversaryGetLimitTokensOverflow: GetLimit's key states compute the
// bucket in time.Duration nanoseconds (storekit.Bucket): Burst × Interval
// overflows int64 for a period of a day (MaxPer) and a burst over
// 106,751 (MaxBurst is 1,000,000). A key with 999,999 tokens left (the
// claims' SQL grants them) is reported with 0 tokens and a next start
// in the 23rd century; once empty, with tokens it does not have.
func TestAdversaryGetLimitTokensOverflow(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	const burst = readpast.MaxBurst
	putLimit(t, s, readpast.Limit{Key: "slow", Rate: 1, Per: readpast.MaxPer, Burst: burst})
	if g, err := s.TakeTokens(ctx, "slow", 1); err != nil || !g.Granted {
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	state := func() readpast.KeyState {
		info, err := s.GetLimit(ctx, "slow")
		if err != nil || len(info.Keys) != 1 {
			t.Fatalf("GetLimit = %+v, %v", info, err)
		}
		return info.Keys[0]
	}
	if k := state(); k.Tokens != burst-1 || !k.NextStart.IsZero() {
		t.Errorf("slow (burst %d, one taken): GetLimit says %d tokens, next start %v; want %d tokens, no next start",
			burst, k.Tokens, k.NextStart, burst-1)
	}
	// The claims' SQL grants them.
	if g, err := s.TakeTokens(ctx, "slow", burst-1); err != nil || !g.Granted {
		t.Fatalf("TakeTokens(%d) = %+v, %v; want granted", burst-1, g, err)
	}
	if k := state(); k.Tokens != 0 {
		t.Errorf("slow, its whole burst taken: GetLimit says %d tokens, want 0", k.Tokens)
	}
}
