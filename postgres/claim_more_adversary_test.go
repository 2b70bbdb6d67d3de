package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Adversarial tests of the "more" note of keyed claims (postgres/claimmore.go,
// the more CTE of sql/claim.sql). Each TestAdvMore... names the promise it
// attacks; one that fails shows the promise broken.

// advMoreVariant returns the claim statement with its more CTE replaced
// by body (the CTE's SELECT), for comparing the claim with and without the
// added read.
func advMoreVariant(t *testing.T, body string) string {
	t.Helper()
	sql := postgres.ClaimSQL
	i := strings.Index(sql, "\nmore AS (")
	if i < 0 {
		t.Fatal("no more CTE in the claim statement")
	}
	i++
	j := strings.Index(sql[i:], "\n)\n")
	if j < 0 {
		t.Fatal("no end of the more CTE in the claim statement")
	}
	return sql[:i] + "more AS (\n" + body + "\n)\n" + sql[i+j+3:]
}

// advMoreCounting counts the Claim calls a client makes, and keeps the
// store's wake-ups.
type advMoreCounting struct {
	readpast.Store
	claims atomic.Int64
}

func (c *advMoreCounting) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *advMoreCounting) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	return c.Store.(readpast.Notifier).Subscribe(ctx)
}

// advMoreStart is a job a client started.
type advMoreStart struct {
	group string
	at    time.Time
}

// advMoreClient starts a client on store for queues (maxWorkers each) with a
// poll interval of an hour; every job it starts is sent to the channel.
func advMoreClient(t *testing.T, store readpast.Store, maxWorkers int, queues ...string) <-chan advMoreStart {
	t.Helper()
	started := make(chan advMoreStart, 1000)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
		started <- advMoreStart{group: groupName(j.Group), at: time.Now()}
		return nil, nil
	}, nil)
	qs := map[string]readpast.QueueConfig{}
	for _, q := range queues {
		qs[q] = readpast.QueueConfig{MaxWorkers: maxWorkers}
	}
	c, err := readpast.NewClient(store, readpast.Config{Workers: w, Queues: qs, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	return started
}

// advMoreWaitStart returns the first start of group within d, failing with
// what otherwise.
func advMoreWaitStart(t *testing.T, started <-chan advMoreStart, group string, d time.Duration, what string) advMoreStart {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case s := <-started:
			if s.group == group {
				return s
			}
		case <-deadline:
			t.Fatalf("%s: %s's job did not start within %v (poll interval an hour)", what, group, d)
		}
	}
}

// advMoreNoStart fails when a job of group starts within d.
func advMoreNoStart(t *testing.T, started <-chan advMoreStart, group string, d time.Duration, what string) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case s := <-started:
			if s.group == group {
				t.Fatalf("%s: %s's job started while its row was held", what, group)
			}
		case <-deadline:
			return
		}
	}
}

// advMoreKeyRow makes key's row exist: a claim takes its one job and completes
// it. Other keys' jobs must not be pending in q.
func advMoreKeyRow(t *testing.T, s *postgres.Store, key, q string) {
	t.Helper()
	ctx := context.Background()
	keyJobs(t, s, key, q, 1)
	got, err := s.Claim(ctx, claimQ("setup", 1, q))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || groupName(got[0].Group) != key {
		t.Fatalf("setup claim took %v, want %s's job", describe(got), key)
	}
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil {
		t.Fatal(err)
	}
}

// advMoreHold runs sql in a transaction left open until the returned commit is
// called: it commits without any NOTIFY.
func advMoreHold(t *testing.T, s *postgres.Store, sql string, args ...any) (commit func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		tx.Rollback(ctx)
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			tx.Rollback(context.Background())
		}
	})
	return func() {
		done = true
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdvMoreHeldKeyRowBacksOffAndRecovers attacks promises 1 and 2 with a
// key row that a caller's transaction holds open (FOR NO KEY UPDATE, as a
// finisher or an enqueue holds it) for 4 s while the key's job is due: the
// client (poll interval an hour) must look again at backing-off waits
// (about 9 looks to reach 1 s, then one a second: at most 20 claims in
// all, and at least a few), and start the job within about a second of
// the commit, which sends no NOTIFY. Held.
func TestAdvMoreHeldKeyRowBacksOffAndRecovers(t *testing.T) {
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the client stops
	putLimit(t, s, readpast.Limit{Key: "k:*"})
	advMoreKeyRow(t, s, "k:1", "q")
	keyJobs(t, s, "k:1", "q", 1)
	commit := advMoreHold(t, s, "SELECT 1 FROM readpast_groups WHERE group_key = 'k:1' FOR NO KEY UPDATE")

	cs := &advMoreCounting{Store: s}
	started := advMoreClient(t, cs, 2, "q")
	advMoreNoStart(t, started, "k:1", 4*time.Second, "row held")
	n := cs.claims.Load()
	t.Logf("%d claims in the 4 s the row was held", n)
	if n > 30 {
		t.Errorf("%d claims while one mark stayed unclaimable for 4 s: the looks do not back off to one a second", n)
	}
	if n < 4 {
		t.Errorf("%d claims while a due mark was passed over for 4 s: the store does not look again", n)
	}
	commit()
	committed := time.Now()
	got := advMoreWaitStart(t, started, "k:1", 5*time.Second, "after the commit")
	t.Logf("started %v after the commit", got.at.Sub(committed))
	if d := got.at.Sub(committed); d > 2500*time.Millisecond {
		t.Errorf("k:1's job started %v after the holder committed, want about a second (2.5 s at most)", d)
	}
}

// advMoreStartsOnceFreed holds sql in a transaction of its own, checks
// that a client (poll interval an hour) starts no job of group while it
// is held, then commits it and requires the job to start within 2.5 s
// (about a second: the looks back off to one a second), with no NOTIFY.
func advMoreStartsOnceFreed(t *testing.T, s *postgres.Store, sql, group, what string) {
	t.Helper()
	commit := advMoreHold(t, s, sql)
	started := advMoreClient(t, s, 2, "q")
	advMoreNoStart(t, started, group, 2500*time.Millisecond, what)
	commit()
	committed := time.Now()
	got := advMoreWaitStart(t, started, group, 5*time.Second, "after the commit")
	if d := got.at.Sub(committed); d > 2500*time.Millisecond {
		t.Errorf("%s: %s's job started %v after the holder committed, want about a second (2.5 s at most)", what, group, d)
	}
}

// TestAdvMoreNewKeyTryLockHeld attacks promise 1 with a key that has no
// row yet, whose try-lock (1919181683, the one every transaction creating
// or deleting a key's row takes) another transaction holds: the claim
// passes the key over without creating its row. The client must start the
// job within about a second of that transaction's commit. Held.
func TestAdvMoreNewKeyTryLockHeld(t *testing.T) {
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the client stops
	putLimit(t, s, readpast.Limit{Key: "k:*"})
	keyJobs(t, s, "k:2", "q", 1)
	advMoreStartsOnceFreed(t, s, "SELECT pg_advisory_xact_lock(1919181683, hashtext('k:2'))", "k:2", "try-lock held")
}

// TestAdvMoreJobRowHeld attacks promise 1 with the key's head job row
// locked by another transaction (FOR UPDATE, as a Cancel or RunNow in a
// caller's transaction would): the claim holds the key but cannot take
// the job, marks the key again, and must look again until the row is
// free. Held.
func TestAdvMoreJobRowHeld(t *testing.T) {
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the client stops
	putLimit(t, s, readpast.Limit{Key: "k:*"})
	advMoreKeyRow(t, s, "k:3", "q")
	keyJobs(t, s, "k:3", "q", 1)
	advMoreStartsOnceFreed(t, s, "SELECT 1 FROM readpast_jobs WHERE group_key = 'k:3' AND state = 'pending' FOR UPDATE", "k:3", "job row held")
}

// TestAdvMoreLaterKeyHeld attacks promise 1 with a job of two keys
// (EnqueueParams.Keys) whose later key's row another transaction holds:
// the claim holds the first key, passes the job over as "held", and must
// look again until the later key is free. Held.
func TestAdvMoreLaterKeyHeld(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the client stops
	putLimit(t, s, readpast.Limit{Key: "k:*"})
	advMoreKeyRow(t, s, "k:b", "q")
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "q", Keys: []string{"k:a", "k:b"}}}); err != nil {
		t.Fatal(err)
	}
	advMoreStartsOnceFreed(t, s, "SELECT 1 FROM readpast_groups WHERE group_key = 'k:b' FOR NO KEY UPDATE", "k:a", "later key held")
}

// advMoreTraffic runs a client on s for queue q while another store
// enqueues a job of a fresh key into q every 100 ms for 4 s, and returns
// the client's claims and the jobs it started meanwhile.
func advMoreTraffic(t *testing.T, s, other *postgres.Store, q, prefix string) (claims int64, jobs int) {
	t.Helper()
	cs := &advMoreCounting{Store: s}
	started := advMoreClient(t, cs, 4, q)
	time.Sleep(500 * time.Millisecond) // the start's claims and wake-ups
	from := cs.claims.Load()
	end := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		keyJobs(t, other, fmt.Sprintf("%s:%d", prefix, i), q, 1)
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	claims = cs.claims.Load() - from
	for {
		select {
		case st := <-started:
			if strings.HasPrefix(st.group, prefix+":") {
				jobs++
			}
		default:
			return claims, jobs
		}
	}
}

// TestAdvMoreStuckMarkWithTraffic attacks promise 2 (the looks a mark that
// stays unclaimable causes back off to one a second per store). A
// caller's transaction holds key k:1's row open while its job is due, and
// meanwhile jobs of other keys arrive in the same queue, one every 100 ms
// for 4 s, each woken by its enqueue. Every claim that takes one of them
// comes back short and says "more" (k:1's due mark is still there). Were
// the wait started over by a claim that took jobs, or a look set by every
// such claim, each arrival would start looks of its own that never back
// off (129 to 459 extra claims). The control is the same traffic with
// k:1's row free (its job taken at once). The test fails when the stuck
// mark causes more than 40 claims over the 4 s (backing off to one a
// second from 5 ms is about 9 looks, then one a second; the rest is
// room for a loaded machine).
func TestAdvMoreStuckMarkWithTraffic(t *testing.T) {
	run := func(t *testing.T, stuck bool) (int64, int) {
		s := newStore(t)
		t.Cleanup(func() { s.Close() })
		other, err := postgres.Open(context.Background(), s.Pool().Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		putLimit(t, s, readpast.Limit{Key: "k:*"})
		if stuck {
			advMoreKeyRow(t, s, "k:1", "q")
			keyJobs(t, s, "k:1", "q", 1)
			advMoreHold(t, s, "SELECT 1 FROM readpast_groups WHERE group_key = 'k:1' FOR NO KEY UPDATE")
		}
		return advMoreTraffic(t, s, other, "q", "t")
	}
	var control, withStuck int64
	var jobsControl, jobsStuck int
	t.Run("control", func(t *testing.T) { control, jobsControl = run(t, false) })
	t.Run("stuck", func(t *testing.T) { withStuck, jobsStuck = run(t, true) })
	t.Logf("claims over 4 s of traffic: %d (%d jobs) with every key free, %d (%d jobs) with k:1's row held open", control, jobsControl, withStuck, jobsStuck)
	if caused := withStuck - control; caused > 40 {
		t.Fatalf("a mark left unclaimable by a transaction held open caused %d extra claims in 4 s (%d against %d, for %d jobs): "+
			"the looks it causes do not back off to one a second", caused, withStuck, control, jobsStuck)
	}
}

// TestAdvMoreMarkDueAfterTxStart attacks promise 1 where a claim's
// transaction began before another claim's, and its statement's snapshot
// was taken after that claim committed. The other claim (B) took key
// k:1's first job and, its turn moved, marked k:1 again at its own
// now(), the start of its transaction: a time after the first claim's (A)
// now(). A reads that mark, unlocked and due by the wall clock, but not
// due by its now() (run_at <= now()), so it neither takes it nor says
// "more": it comes back short, and its store schedules no look, while
// k:1's second job is claimable and nobody wakes anybody for it.
//
// The interleaving is made deterministic with a session whose default
// isolation is REPEATABLE READ (the store then claims in READ COMMITTED
// transactions of its own: BEGIN, then the routine) behind a proxy that
// holds back the answer to BEGIN while B runs. With autocommit claims the
// window is the routine's first statement (claim_queues.sql), narrower
// but the same.
func TestAdvMoreMarkDueAfterTxStart(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "k:*"})
	keyJobs(t, s, "k:1", "q", 2)
	keyJobs(t, s, "k:2", "q", 1)

	p := proxyTo(t, s)
	st := newStallWith(t, s, "adv.more.none", p.Addr(), map[string]string{"default_transaction_isolation": "repeatable read"})
	if _, err := st.store.Claim(ctx, claimQ("warm", 1, "warm")); err != nil {
		t.Fatal(err)
	}
	p.HoldResponses()
	var a []*readpast.Job
	doneA := async(func() error {
		var err error
		a, err = st.store.Claim(ctx, claimQ("a", 5, "q"))
		return err
	})
	// A's BEGIN has run (its now() is fixed); its answer is held back.
	var aStart time.Time
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Pool().QueryRow(ctx, `SELECT xact_start FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle in transaction' AND query ILIKE 'begin%'`).Scan(&aStart)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			p.ReleaseAll()
			t.Fatalf("A's BEGIN did not run: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	b, err := s.Claim(ctx, claimQ("b", 1, "q"))
	if err != nil {
		p.ReleaseAll()
		t.Fatal(err)
	}
	if len(b) != 1 || groupName(b[0].Group) != "k:1" {
		p.ReleaseAll()
		t.Fatalf("B took %v, want k:1's first job", describe(b))
	}
	var markAt time.Time
	if err := s.Pool().QueryRow(ctx, "SELECT run_at FROM readpast_group_ready WHERE group_key = 'k:1'").Scan(&markAt); err != nil {
		p.ReleaseAll()
		t.Fatal(err)
	}
	p.ReleaseAll()
	within(t, "A's claim", 5*time.Second, doneA)
	t.Logf("A's transaction began at %v, B marked k:1 again at %v; A took %v", aStart.Format(time.StampMicro), markAt.Format(time.StampMicro), describe(a))
	for _, j := range a {
		if groupName(j.Group) == "k:1" {
			t.Skip("A took k:1's second job: the interleaving did not happen")
		}
	}
	// A look was scheduled if A's store set a wait (a fresh store: A's
	// claim is its only one); the alarm itself may have fired already.
	looked := postgres.AdvMoreWait(st.store) != 0
	// Is k:1's second job claimable now? A fresh claim says.
	c, err := s.Claim(ctx, claimQ("c", 5, "q"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 1 || groupName(c[0].Group) != "k:1" {
		t.Fatalf("a fresh claim took %v, want k:1's second job", describe(c))
	}
	if !looked {
		t.Fatalf("A's claim came back short (%d of 5) while k:1's second job was claimable (B's mark at %v, "+
			"after A's now() %v, so not due for A), and A's store scheduled no look: a client would sleep until its poll. "+
			"The more read (and the routine's check for due marks) compares run_at with now(), the start of A's transaction",
			len(a), markAt.Format(time.StampMicro), aStart.Format(time.StampMicro))
	}
}

// advMoreOutcome runs a claim statement in a transaction it rolls back and
// describes what it did: the jobs in the order returned, then the marks
// and key rows it left.
func advMoreOutcome(t *testing.T, s *postgres.Store, sql string, limit int) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, sql, []string{"q"}, "adv", int64(limit), time.Minute.Microseconds(), uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		raw := rows.RawValues()
		if raw[0] == nil {
			if note := string(raw[len(raw)-1]); !strings.HasPrefix(note, "more:") {
				// The times a due note lists are the claim's clock.
				b.WriteString(fmt.Sprintf("note due (%d times)\n", strings.Count(note, ",")+1))
			}
			continue
		}
		fmt.Fprintf(&b, "job %x\n", raw[0])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var marks, groups string
	if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s %s %s %s', queue, priority, job_id, group_key), '; ' ORDER BY queue, priority, run_at, job_id), '')
		FROM readpast_group_ready`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s running %s turn_used %s waiters %s', group_key, running, turn_used, waiters), '; ' ORDER BY group_key), '')
		FROM readpast_groups`).Scan(&groups); err != nil {
		t.Fatal(err)
	}
	return b.String() + "marks: " + marks + "\ngroups: " + groups
}

// TestAdvMoreClaimUnchanged attacks promise 3 (the claim takes, orders and
// leaves exactly what it did before). On one backlog of several kinds of
// keys (unbounded, bounded and full, throttled, weighted, jobs of two
// keys, a key row held by another transaction, ungrouped jobs), claims of
// 1, 2, 3, 5 and 50 jobs run with the statement as it is and with its
// more CTE's added read removed, each in a transaction rolled back: the
// jobs returned, in order, and the marks and key rows left must be the
// same (the note rows aside). Held.
func TestAdvMoreClaimUnchanged(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the held transaction ends
	putLimit(t, s, readpast.Limit{Key: "u:*"})
	putLimit(t, s, readpast.Limit{Key: "b:*", Concurrency: 2})
	putLimit(t, s, readpast.Limit{Key: "r:*", Rate: 1, Per: time.Hour, Burst: 2})
	putLimit(t, s, readpast.Limit{Key: "w:*", Weight: 3})
	advMoreKeyRow(t, s, "u:held", "q")
	keyJobs(t, s, "u:held", "q", 2)
	keyJobs(t, s, "u:1", "q", 3)
	keyJobs(t, s, "b:1", "q", 4)
	keyJobs(t, s, "r:1", "q", 3)
	keyJobs(t, s, "w:1", "q", 4)
	keyJobs(t, s, "u:2", "q", 2)
	var ps []readpast.EnqueueParams
	for range 3 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: "q", Keys: []string{"u:3", "b:1"}},
			readpast.EnqueueParams{Kind: "k", Queue: "q"})
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	advMoreHold(t, s, "SELECT 1 FROM readpast_groups WHERE group_key = 'u:held' FOR NO KEY UPDATE")
	without := advMoreVariant(t, "    SELECT 'more' AS payload WHERE false")
	for _, limit := range []int{1, 2, 3, 5, 50} {
		asIs := advMoreOutcome(t, s, postgres.ClaimSQL, limit)
		base := advMoreOutcome(t, s, without, limit)
		if asIs != base {
			t.Errorf("claim of %d: with the more read\n%s\nwithout\n%s", limit, asIs, base)
		}
	}
}

// TestAdvMoreIdleStoreSleeps attacks promise 2's idle case: a store whose
// queues have no due mark (a key out of tokens, marked at its next start
// an hour ahead; a keyed job enqueued for an hour later; jobs without
// keys, all taken) must not wake its claimers for this reason: a client
// with a poll interval of an hour makes no claim over 3 s once it has
// taken what was due. Held.
func TestAdvMoreIdleStoreSleeps(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() })
	putLimit(t, s, readpast.Limit{Key: "r:*", Rate: 1, Per: time.Hour, Burst: 1})
	keyJobs(t, s, "r:1", "q", 3)
	later := time.Now().Add(time.Hour)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "q", Group: "u:later", RunAt: later},
		{Kind: "k", Queue: "q"}, {Kind: "k", Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	cs := &advMoreCounting{Store: s}
	started := advMoreClient(t, cs, 4, "q")
	// r:1's first job and the jobs without keys start (slowly on a loaded
	// machine), then the start's wake-ups pass.
	for deadline := time.Now().Add(20 * time.Second); len(started) < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	n := len(started)
	from := cs.claims.Load()
	time.Sleep(3 * time.Second)
	if got := cs.claims.Load() - from; got > 0 {
		t.Fatalf("%d claims in 3 s of a store with no due mark (%d jobs started before): it wakes for nothing", got, n)
	}
	if n != 3 {
		t.Fatalf("%d jobs started, want r:1's first and the two without keys", n)
	}
}
