package sqlite_test

import (
	"context"
	"database/sql"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/sqlite"
)

// adv4Woken reports whether ch gets a wake-up within d.
func adv4Woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// adv4WakeGoroutines counts the goroutines parked in announceOnTxEnd
// (storedInTx) until the caller's transaction ends.
func adv4WakeGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "created by github.com/readpast/readpast/sqlite.(*Store).announceOnTxEnd")
}

// TestAdvWakeAlarmBeforeCommit: a job enqueued in the caller's
// transaction for a little later. Its alarm (dueLater) fires while the
// transaction is still open: the claim it starts finds nothing. The
// commit must still wake the claimers, and the claim then gets the job.
func TestAdvWakeAlarmBeforeCommit(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", RunAt: time.Now().Add(30 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	// Only the alarm can wake now: the transaction holds the one write
	// connection.
	if !adv4Woken(ch, 5*time.Second) {
		t.Fatal("the alarm never fired")
	}
	if got := claimDefault(ctx, s); len(got) != 0 {
		t.Fatalf("a claim before the commit got %d jobs", len(got))
	}
	replay.Drain(ch)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !adv4Woken(ch, 5*time.Second) {
		t.Fatal("no wake-up after the commit: the alarm's wake-up was spent before it, and the job waits for the poll")
	}
	if got := claimDefault(ctx, s); len(got) != 1 {
		t.Fatalf("the claim woken after the commit got %d jobs, want 1", len(got))
	}
}

// TestAdvWakeSeveralWritesRollbackThenCommit: three SQLTx writes in
// one transaction that rolls back, then the same in one that commits. No
// wake-up goroutine outlives its transaction, and the committed jobs are
// announced.
func TestAdvWakeSeveralWritesRollbackThenCommit(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	b, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := adv4WakeGoroutines()
	write := func(tx *sql.Tx) {
		t.Helper()
		if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "a"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Ref: "x", Job: readpast.EnqueueParams{Kind: "b"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddToBatchSQLTx(ctx, tx, b.ID, []readpast.EnqueueParams{{Kind: "c"}}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(tx)
	if n := adv4WakeGoroutines() - base; n != 3 {
		t.Fatalf("%d wake-up goroutines wait for the transaction, want one a write (3)", n)
	}
	if adv4Woken(ch, 100*time.Millisecond) {
		t.Fatal("woken while the transaction is open")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	advUntil4(t, "the wake-up goroutines end after the rollback", func() bool { return adv4WakeGoroutines() == base })
	replay.Drain(ch)
	if got := claimDefault(ctx, s); len(got) != 0 {
		t.Fatalf("rolled back, yet a claim got %d jobs", len(got))
	}
	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(tx)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !adv4Woken(ch, 5*time.Second) {
		t.Fatal("no wake-up after the commit")
	}
	if got := claimDefault(ctx, s); len(got) != 3 {
		t.Fatalf("the claim woken after the commit got %d jobs, want 3", len(got))
	}
	advUntil4(t, "the wake-up goroutines end after the commit", func() bool { return adv4WakeGoroutines() == base })
}

// TestAdvWakeTxOpenUntilClose: the caller's transaction is never
// ended before Store.Close. Close must return, the wake-up goroutines
// must end without waking anyone (and without a panic), and ending the
// transaction afterwards must not panic either.
func TestAdvWakeTxOpenUntilClose(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := adv4WakeGoroutines()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := adv4WakeGoroutines() - base; n != 5 {
		t.Fatalf("%d wake-up goroutines wait for the transaction, want one a write (5)", n)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Logf("Close with the transaction open: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while the caller's transaction was open: deadlock")
	}
	advUntil4(t, "the wake-up goroutines end at Close", func() bool { return adv4WakeGoroutines() == base })
	for range ch { // closed by Close; a value before that was a wake-up
		t.Error("woken, though the transaction never ended")
	}
	t.Logf("commit after Close: %v", tx.Commit())
}

// TestAdvWakeTxEndsWhileClosing: the caller's transaction commits
// while Close runs, the wake-up goroutine racing the hub's and the pool's
// close. Run with -race; nothing may panic.
func TestAdvWakeTxEndsWhileClosing(t *testing.T) {
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		s := openTemp(t)
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = tx.Commit() }()
		go func() { defer wg.Done(); _ = s.Close() }()
		wg.Wait()
	}
}

// adv4CommitCtx is a context that ends once check reports true, checked
// whenever it is asked whether it is done: a deterministic stand-in for a
// deadline that passes just after a write committed.
type adv4CommitCtx struct {
	context.Context
	check func() bool

	mu    sync.Mutex
	ch    chan struct{}
	fired bool
}

func (c *adv4CommitCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fired && c.check() {
		c.fired = true
		close(c.ch)
	}
	return c.ch
}

func (c *adv4CommitCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		return context.Canceled
	}
	return nil
}

// TestAdvWakeSealBatchContextEndsAfterCommit: SealBatch releases the
// finishing job of a batch whose members all ended, and commits; it wakes
// the claimers only after reading the batch back (s.Batch) with the
// caller's context. When that context ends between the commit and the
// read (a deadline, a client gone), SealBatch returns an error and wakes
// no one: the finishing job is pending and claimable, and waits for the
// poll.
func TestAdvWakeSealBatchContextEndsAfterCommit(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	b, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddToBatch(ctx, b.ID, []readpast.EnqueueParams{{Kind: "m", Queue: "m"}}); err != nil {
		t.Fatal(err)
	}
	m := claimOne(ctx, t, s, "m")
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: m.ID, Token: m.Token}}); err != nil {
		t.Fatal(err)
	}
	// A second connection watches the finishing job's committed state.
	watch, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	released := func() bool {
		var state string
		if err := watch.QueryRow("SELECT state FROM readpast_jobs WHERE id = ?", b.ID).Scan(&state); err != nil {
			return false
		}
		return state == string(readpast.StatePending)
	}
	if released() {
		t.Fatal("the finishing job is pending before the seal")
	}
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cctx := &adv4CommitCtx{Context: context.Background(), check: released, ch: make(chan struct{})}
	_, err = s.SealBatch(cctx, b.ID)
	t.Logf("SealBatch: %v", err)
	if !released() {
		t.Fatal("the seal did not commit: no window")
	}
	woken := adv4Woken(ch, 2*time.Second)
	got, cerr := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"fin"}, Worker: "w", Limit: 1, Lease: time.Minute})
	if !woken {
		t.Fatalf("SealBatch committed the release of finishing job %d (a claim now gets %d jobs, %v) but returned %v and woke no one: the job waits for the poll",
			b.ID, len(got), cerr, err)
	}
}

// advUntil4 polls cond every millisecond for up to 10 s.
func advUntil4(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var _ = sqlite.Options{}

// adv4SlowCtx sleeps each time it is asked whether it is done, once armed:
// it stretches a store call's transaction without changing what it does.
type adv4SlowCtx struct {
	context.Context
	sleep time.Duration
}

func (c adv4SlowCtx) Done() <-chan struct{} {
	time.Sleep(c.sleep)
	return c.Context.Done()
}

// TestAdvWakeClaimLeavesKeyOutOfTokens: a claim takes the one token of
// a rate-limited key and leaves the key's next job marked at the bucket's
// next start, which it returns for an alarm (claim.go: next, dueAt). When
// that start has passed by the time the claim returns (a short interval,
// or a claim transaction slower than it: a commit's fsync), dueAt drops
// it as not later than now, and the claim's own wake-up (freed) counted
// only marks due at the claim's start. The job is claimable, and no
// subscriber is woken: it waits for the poll.
func TestAdvWakeClaimLeavesKeyOutOfTokens(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit readpast.Limit
		slow  time.Duration // per Done call of the claim's context
	}{
		{"1µs interval", readpast.Limit{Key: "g", Rate: 1_000_000, Per: time.Second, Burst: 1}, 0},
		{"5ms interval, slow claim", readpast.Limit{Key: "g", Rate: 200, Per: time.Second, Burst: 1}, time.Millisecond},
	} {
		replay.Run(t, c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			if _, err := s.PutLimit(ctx, c.limit); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a", Group: "g"}, {Kind: "b", Group: "g"}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the bucket is full again
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			got, err := s.Claim(adv4SlowCtx{ctx, c.slow}, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
			took := time.Since(began)
			if err != nil || len(got) != 1 {
				t.Fatalf("the first claim: %d jobs, %v; want 1 (one token)", len(got), err)
			}
			interval := c.limit.Per / time.Duration(c.limit.Rate)
			if took <= interval {
				t.Skipf("the claim took %v, within the key's interval %v: no window", took, interval)
			}
			woken := adv4Woken(ch, 2*time.Second)
			again := claimDefault(ctx, s)
			if !woken {
				t.Fatalf("the claim (%v, the key's interval %v) left the key's next job marked at a next start already past when it returned: no alarm, no wake-up in 2 s; a claim now gets %d jobs: it waits for the poll",
					took.Round(time.Microsecond), interval, len(again))
			}
		})
	}
}

// TestAdvWakeCompleteFreesSlotOfKeyOutOfTokens: a key with
// concurrency 1 and a rate. A claim takes its first job and its one
// token; with no slot left, the claim marks nothing and sets no alarm
// (claim.go: a group with no free slot is skipped, next stays empty).
// The job's completion, before the next start, frees the slot and marks
// the key's next job at that start (announceHeads: "the claim that spent
// them set an alarm for it", which it did not). The mark is not due now,
// so the completion wakes no one either: at the next start the job is
// claimable, and no subscriber hears of it. Both Complete and
// CompleteSQLTx.
func TestAdvWakeCompleteFreesSlotOfKeyOutOfTokens(t *testing.T) {
	for _, viaTx := range []bool{false, true} {
		name := "Complete"
		if viaTx {
			name = "CompleteSQLTx"
		}
		replay.Run(t, name, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			per := 300 * time.Millisecond
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: per, Burst: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a", Group: "g"}, {Kind: "b", Group: "g"}}); err != nil {
				t.Fatal(err)
			}
			first := claimOne(ctx, t, s, readpast.DefaultQueue)
			took := time.Now()
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if viaTx {
				tx, err := s.DB().BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: first.ID, Token: first.Token}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			} else {
				res, err := s.Complete(ctx, []readpast.Completion{{ID: first.ID, Token: first.Token}})
				if err != nil || res[0] != nil {
					t.Fatal(err, res)
				}
			}
			if time.Since(took) >= per {
				t.Skip("the completion came after the next start: no window")
			}
			// Claim at every wake-up, as a worker does: one that comes
			// before the next start finds nothing, and another must
			// come. (took is read after the claim returned, later than
			// the clock the claim computed the next start from: a
			// wake-up at the next start can come before took+per.)
			deadline := time.After(3 * time.Second)
			for {
				select {
				case <-ch:
					if got := claimDefault(ctx, s); len(got) == 1 {
						return
					}
					continue
				case <-deadline:
				}
				break
			}
			got := claimDefault(ctx, s)
			t.Fatalf("no wake-up at or after the key's next start (%v after the first claim); a claim now gets %d jobs: the job waited for the poll", per, len(got))
		})
	}
}
