package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Adversarial replays of the windows of keys without a concurrency bound
// (fragments/free_slots.sql "unbounded", migrations/0022, fold_freed.sql,
// apply_limit.sql "skip"/"one").

// ubRow is a key's row as stored (no counts subtracted).
type ubRow struct {
	limitKey   *string
	maxRunning int
	running    int
	counts     int
}

func ubRowOf(t *testing.T, s *postgres.Store, key string) ubRow {
	t.Helper()
	var r ubRow
	err := s.Pool().QueryRow(context.Background(), `
		SELECT g.limit_key, g.max_running, g.running,
		       coalesce((SELECT sum(n) FROM readpast_key_freed f WHERE f.group_key = g.group_key), 0)::int
		FROM readpast_groups g WHERE g.group_key = $1`, key).Scan(&r.limitKey, &r.maxRunning, &r.running, &r.counts)
	if err != nil {
		t.Fatalf("row of %s: %v", key, err)
	}
	return r
}

// ubOrphanCounts fails on freed-slot counts of keys that have no row.
func ubOrphanCounts(t *testing.T, s *postgres.Store) {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM readpast_key_freed f
		WHERE NOT EXISTS (SELECT 1 FROM readpast_groups g WHERE g.group_key = f.group_key)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d freed-slot counts of keys without a row", n)
	}
}

// ubRowWaiters counts sessions of this database waiting for a row lock.
func ubRowWaiters(t *testing.T, s *postgres.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
		JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND l.locktype IN ('transactionid', 'tuple') AND a.datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func ubWaitRowWaiters(t *testing.T, s *postgres.Store, want int) {
	t.Helper()
	deadline := time.Now().Add(withinAtLeast)
	for ubRowWaiters(t, s) < want {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d sessions wait for a row", want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ubWaitLimitsLockWaiter waits until a session of this database waits for
// the limits' lock.
func ubWaitLimitsLockWaiter(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(withinAtLeast)
	for {
		var n int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
			JOIN pg_database d ON d.oid = l.database
			WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 1919181686 AND l.objid = 0
			  AND l.objsubid = 2 AND d.datname = current_database()`).Scan(&n); err != nil {
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

func ubClaimAll(t *testing.T, s *postgres.Store, worker string, n int, queues ...string) []*readpast.Job {
	t.Helper()
	return claimWithin(t, "a claim", withinAtLeast, s, claimQ(worker, n, queues...))
}

func ubComplete(t *testing.T, s *postgres.Store, j *readpast.Job) {
	t.Helper()
	if err := first(s.Complete(context.Background(), []readpast.Completion{{ID: j.ID, Token: j.Token}})); err != nil {
		t.Fatal(err)
	}
}

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// TestAdvUnboundedOneRowWhileAnotherChangeHoldsTheLock: a limit change
// gives each row it passed over its limit in a transaction of its own
// ("one"), which waits for the row and then takes the limits' lock
// shared, waiting. readpast_key_limit only tries that lock, and answers
// the default limit (concurrency 1, no limit key) when another change
// holds it exclusively. Window: the template u* (no bound) is given
// concurrency 2 while a completion of a job of u:1 and u:2 holds both
// rows FOR KEY SHARE; the change's first "one" waits for u:1; a PutLimit
// of an unrelated key takes the limits' lock and holds it (stalled at
// limit.put) when the completion commits, so "one" gets u:1's row while
// the lock is held. It must wait for the lock and give both rows u*'s
// limit, never the default, nor leave them without their new bound.
func TestAdvUnboundedOneRowWhileAnotherChangeHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u*"})
	putLimit(t, s, readpast.Limit{Key: "z", Concurrency: 1})
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "qa", Keys: []string{"u:1", "u:2"}}}); err != nil {
		t.Fatal(err)
	}
	got := ubClaimAll(t, s, "w", 1, "qa")
	if len(got) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got))
	}
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "u*", Concurrency: 2})
		return err
	})
	ubWaitRowWaiters(t, s, 1) // its "one" waits for u:1, holding nothing else
	other := newStall(t, s, "limit.put")
	otherDone := async(func() error {
		_, err := other.store.PutLimit(ctx, readpast.Limit{Key: "z", Concurrency: 3})
		return err
	})
	other.waitBlocked() // the other change holds the limits' lock exclusively
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ubWaitLimitsLockWaiter(t, s) // "one" holds u:1's row and waits for the lock
	other.open()
	within(t, "PutLimit(z)", withinAtLeast, otherDone)
	within(t, "PutLimit(u*)", withinAtLeast, put)
	for _, k := range []string{"u:1", "u:2"} {
		r := ubRowOf(t, s, k)
		lk := "<nil>"
		if r.limitKey != nil {
			lk = *r.limitKey
		}
		if r.maxRunning != 2 || lk != "u*" {
			t.Errorf("key %s: row has limit %s, max_running %d; want u*, 2", k, lk, r.maxRunning)
		}
	}
	checkGroups(t, s)
	ps := make([]readpast.EnqueueParams, 3)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: "qb", Group: "u:2"}
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w2", 10, "qb")); n != 2 {
		t.Errorf("a claim took %d jobs of u:2 (limit u* = 2, none running), want 2", n)
	}
}

// TestAdvUnboundedBoundLiftedAfterCompletionSnapshot: a completion (in a
// caller's transaction) takes its snapshot while key k has a bound, and
// stops before it locks the job; the key's bound is lifted (PutLimit with
// concurrency 0) and committed; the completion goes on. Its "unbounded"
// CTE judges the row by its snapshot (bounded), so it gives the slot back
// on the row, as for a key with a bound, holding the row until the caller
// commits: the promise that claims never pass such a key over holds for
// completions whose statement began after the bound was lifted
// (docs/design/flow-control.md, "Keys without a bound"). The counts must
// stay exact, and the key's jobs start once the caller commits.
func TestAdvUnboundedBoundLiftedAfterCompletionSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "k", Concurrency: 5})
	keyJobs(t, s, "k", "qa", 4)
	got := ubClaimAll(t, s, "w", 1, "qa")
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	fin := newStall(t, s, "complete.before_locks")
	tx, err := fin.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	done := async(func() error {
		return fin.store.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token})
	})
	fin.waitBlocked()
	putLimit(t, s, readpast.Limit{Key: "k"}) // no bound from now on
	fin.open()
	within(t, "the completion", withinAtLeast, done)
	// The completion is open, the key has no bound.
	if r := ubRowOf(t, s, "k"); r.maxRunning != 2147483647 {
		t.Fatalf("k has max_running %d, want no bound", r.maxRunning)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if jobs := ubClaimAll(t, s, "w2", 10, "qa"); len(jobs) != 3 {
		t.Errorf("a claim took %d jobs of a key without a bound and 3 pending, want 3", len(jobs))
	}
	checkGroups(t, s)
}

// TestAdvUnboundedFinisherAfterClaimThenBound: a completion stops after
// its snapshot, before it locks the key's row (finish.key_share); a claim
// of the key commits (a non-key update of the row), then a limit gives
// the key a bound of 2 (a FOR UPDATE then an update of the row), then the
// completion goes on. Its FOR KEY SHARE meets the claim's version first
// (a non-key update it need not wait for) and must still find the bound
// on the newest version; else its slot is counted beside a bounded row,
// and the key looks full (2 on its row) with one job running.
func TestAdvUnboundedFinisherAfterClaimThenBound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 5) // 2 running
	fin := newStall(t, s, "finish.key_share")
	done := async(func() error {
		return first(fin.store.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}))
	})
	fin.waitBlocked()
	third := ubClaimAll(t, s, "w3", 1, "qa")
	if len(third) != 1 {
		t.Fatalf("claimed %d, want 1", len(third))
	}
	ubComplete(t, s, third[0]) // another non-key update after the claim's
	putLimit(t, s, readpast.Limit{Key: "u", Concurrency: 2})
	fin.open()
	within(t, "the completion", withinAtLeast, done)
	checkGroups(t, s)
	r := ubRowOf(t, s, "u")
	if r.running != 1 || r.counts != 0 {
		t.Errorf("u's row: running %d with counts %d beside it; want 1 and 0 (a bounded key's row must be exact)", r.running, r.counts)
	}
	if jobs := ubClaimAll(t, s, "w4", 10, "qa"); len(jobs) != 1 {
		t.Errorf("a claim took %d jobs of a key with 1 of 2 running, want 1", len(jobs))
	}
	checkGroups(t, s)
}

// TestAdvUnboundedDeleteLimitToDefault: u has no bound and 3 running; one
// completion is held open in a caller's transaction (its count beside the
// row, uncommitted), another stopped at finish.key_share with its snapshot;
// DeleteLimit(u) makes it fall back to the default of 1 and waits for the
// open one. Once both finish, 1 runs on an exact row: the key is full, and
// a completion of the last frees exactly one slot.
func TestAdvUnboundedDeleteLimitToDefault(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 6)
	more := ubClaimAll(t, s, "w3", 1, "qa")
	if len(more) != 1 {
		t.Fatalf("claimed %d", len(more))
	}
	got = append(got, more...) // 3 running
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	fin := newStall(t, s, "finish.key_share")
	done := async(func() error {
		return first(fin.store.Complete(ctx, []readpast.Completion{{ID: got[1].ID, Token: got[1].Token}}))
	})
	fin.waitBlocked()
	del := async(func() error { return s.DeleteLimit(ctx, "u") })
	ubWaitRowWaiters(t, s, 1)
	fin.open()
	within(t, "the stalled completion", withinAtLeast, done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "DeleteLimit", withinAtLeast, del)
	checkGroups(t, s)
	r := ubRowOf(t, s, "u")
	if r.maxRunning != 1 || r.running != 1 || r.counts != 0 {
		t.Errorf("u's row: max_running %d running %d counts %d; want 1, 1, 0", r.maxRunning, r.running, r.counts)
	}
	if jobs := ubClaimAll(t, s, "w4", 10, "qa"); len(jobs) != 0 {
		t.Errorf("a claim took %d jobs of a full key (limit 1, 1 running)", len(jobs))
	}
	ubComplete(t, s, got[2])
	if jobs := ubClaimAll(t, s, "w5", 10, "qa"); len(jobs) != 1 {
		t.Errorf("a claim took %d jobs of a key with its only slot free, want 1", len(jobs))
	}
	checkGroups(t, s)
}

// TestAdvUnboundedEveryEnding: every way an attempt ends, on a key
// without a bound: fail with a retry (pending again), rescue of an expired
// lease followed by the late completion of the rescued attempt, release,
// snooze, cancel, bulk cancel; then Tidy, a bound of 2 and PruneGroups.
// The true running count must match at each step, and the bound must be
// exact once given.
func TestAdvUnboundedEveryEnding(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u"})
	keyJobs(t, s, "u", "qa", 8)
	short := readpast.ClaimParams{Worker: "short", Queues: []string{"qa"}, Limit: 1, Lease: 20 * time.Millisecond}
	late, err := s.Claim(ctx, short)
	if err != nil || len(late) != 1 {
		t.Fatalf("claim: %v, %v", late, err)
	}
	jobs := ubClaimAll(t, s, "w", 6, "qa")
	if len(jobs) != 6 {
		t.Fatalf("claimed %d, want 6", len(jobs))
	}
	checkGroups(t, s)
	if errs, err := s.Fail(ctx, []readpast.Failure{{ID: jobs[0].ID, Token: jobs[0].Token, Message: "x", RetryAt: time.Now()}}); err != nil || errs[0] != nil {
		t.Fatalf("fail: %v %v", errs, err)
	}
	checkGroups(t, s)
	time.Sleep(50 * time.Millisecond)
	if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("rescued %d, %v; want 1", n, err)
	}
	checkGroups(t, s)
	if err := first(s.Complete(ctx, []readpast.Completion{{ID: late[0].ID, Token: late[0].Token}})); err == nil {
		t.Errorf("the late completion of a rescued attempt succeeded")
	}
	checkGroups(t, s)
	if err := s.Release(ctx, jobs[1].ID, jobs[1].Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Snooze(ctx, jobs[2].ID, jobs[2].Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, jobs[3].ID); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if r := ubRowOf(t, s, "u"); r.counts != 0 || r.running != 2 {
		t.Errorf("after Tidy: row running %d, counts %d; want 2, 0", r.running, r.counts)
	}
	if _, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: "qa", State: readpast.StateRunning}); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	putLimit(t, s, readpast.Limit{Key: "u", Concurrency: 2})
	if r := ubRowOf(t, s, "u"); r.counts != 0 || r.running != 0 {
		t.Errorf("after the bound: row running %d, counts %d; want 0, 0", r.running, r.counts)
	}
	if n := len(ubClaimAll(t, s, "w2", 10, "qa")); n != 2 {
		t.Errorf("a claim took %d jobs under a bound of 2 with none running, want 2", n)
	}
	checkGroups(t, s)
	ubOrphanCounts(t, s)
}

// TestAdvUnboundedTwoKeysBothOrders: jobs naming [b, u] and [u, b] (b has
// a bound of 2, full while both run; u none), held-open completions of one of each order in
// two caller transactions with short deadlock timeouts, while u gains a
// bound (the limit change waits for both), then both commit. No deadlock,
// exact counts, and b, whose row the open completions hold, is passed over
// by claims but u is not before the change.
func TestAdvUnboundedTwoKeysBothOrders(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u"})
	putLimit(t, s, readpast.Limit{Key: "b", Concurrency: 2}) // full with both running: slots go back on b's row
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qa", Keys: []string{"b", "u"}},
		{Kind: "k", Queue: "qa", Keys: []string{"u", "b"}},
	}); err != nil {
		t.Fatal(err)
	}
	keyJobs(t, s, "u", "qb", 3)
	got := ubClaimAll(t, s, "w", 2, "qa")
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	checkGroups(t, s)
	fin := newStall(t, s, "finish.group_rows")
	var txs []pgx.Tx
	var dones []<-chan error
	for i, j := range got {
		var st *postgres.Store = s
		if i == 0 {
			st = fin.store
		}
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		j := j
		dones = append(dones, async(func() error {
			return st.CompleteTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token})
		}))
		if i == 0 {
			fin.waitBlocked() // holds u FOR KEY SHARE, b not yet
		}
	}
	// The second completion (base store) holds b and u now.
	within(t, "the second completion", withinAtLeast, dones[1])
	if n := len(ubClaimAll(t, s, "w2", 1, "qb")); n != 1 {
		t.Errorf("a claim of u beside open completions took %d, want 1", n)
	}
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "u", Concurrency: 2})
		return err
	})
	ubWaitRowWaiters(t, s, 1)
	fin.open() // the first now waits for b (held by the second)
	time.Sleep(300 * time.Millisecond)
	if err := txs[1].Commit(ctx); err != nil {
		t.Fatalf("the second completion's commit: %v", err)
	}
	select {
	case err := <-dones[0]:
		if err != nil {
			t.Fatalf("the first completion: %v (deadlock: %v)", err, isDeadlock(err))
		}
	case <-time.After(withinAtLeast):
		t.Fatal("the first completion did not return")
	}
	if err := txs[0].Commit(ctx); err != nil {
		t.Fatalf("the first completion's commit: %v", err)
	}
	within(t, "PutLimit", withinAtLeast, put)
	checkGroups(t, s)
	r := ubRowOf(t, s, "u")
	if r.counts != 0 || r.running != 1 {
		t.Errorf("u's row after the bound: running %d counts %d; want 1, 0", r.running, r.counts)
	}
	if n := len(ubClaimAll(t, s, "w3", 10, "qb")); n != 1 {
		t.Errorf("a claim took %d of u (1 of 2 running), want 1", n)
	}
	checkGroups(t, s)
}

// TestAdvUnboundedTidyFoldRacesBound: Tidy's fold stops after its
// snapshot (counts of u visible), before it locks u's row (fold.rows); a
// limit gives u a bound, folding the same counts, and commits; Tidy goes
// on. The counts must be subtracted once.
func TestAdvUnboundedTidyFoldRacesBound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 6)
	more := ubClaimAll(t, s, "w3", 2, "qa")
	got = append(got, more...) // 4 running
	ubComplete(t, s, got[0])
	ubComplete(t, s, got[1]) // 2 counts
	tidy := newStall(t, s, "fold.rows")
	done := async(func() error { _, err := tidy.store.Tidy(ctx); return err })
	tidy.waitBlocked()
	putLimit(t, s, readpast.Limit{Key: "u", Concurrency: 3})
	ubComplete(t, s, got[2]) // u has room: counted aside
	tidy.open()
	within(t, "Tidy", withinAtLeast, done)
	checkGroups(t, s)
	if r := ubRowOf(t, s, "u"); r.running-r.counts != 1 {
		t.Errorf("u's row: running %d counts %d; want 1 running", r.running, r.counts)
	}
	if n := len(ubClaimAll(t, s, "w4", 10, "qa")); n != 2 {
		t.Errorf("a claim took %d of u (1 of 3 running), want 2", n)
	}
	checkGroups(t, s)
}

// TestAdvUnboundedPruneBesideCompletion: PruneGroups folds, then deletes
// idle rows; a completion of the key's last job stops at finish.key_share
// (snapshot taken, row not locked yet) while PruneGroups runs. The row
// must not be deleted under it, no count may be left without a row, and
// the key must run again afterwards.
func TestAdvUnboundedPruneBesideCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 2)
	ubComplete(t, s, got[0])
	fin := newStall(t, s, "finish.key_share")
	done := async(func() error {
		return first(fin.store.Complete(ctx, []readpast.Completion{{ID: got[1].ID, Token: got[1].Token}}))
	})
	fin.waitBlocked()
	if _, err := s.PruneGroups(ctx, 100); err != nil {
		t.Fatal(err)
	}
	fin.open()
	within(t, "the completion", withinAtLeast, done)
	checkGroups(t, s)
	ubOrphanCounts(t, s)
	if _, err := s.PruneGroups(ctx, 100); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	ubOrphanCounts(t, s)
	keyJobs(t, s, "u", "qa", 3)
	if n := len(ubClaimAll(t, s, "w3", 10, "qa")); n != 3 {
		t.Errorf("claimed %d of u (no bound), want 3", n)
	}
	checkGroups(t, s)
}

// TestAdvUnboundedTakeTokensBesideCompletion: a key with a rate and no
// concurrency bound; a completion of one of its jobs is held open in a
// caller's transaction (FOR KEY SHARE on the row). TakeTokens locks the
// row FOR NO KEY UPDATE, which does not conflict: it must not wait.
func TestAdvUnboundedTakeTokensBesideCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "r", Rate: 1000, Per: time.Second, Burst: 100})
	keyJobs(t, s, "r", "qa", 3)
	got := ubClaimAll(t, s, "w", 2, "qa")
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	within(t, "TakeTokens beside an open completion of a key without a bound", withinAtLeast, async(func() error {
		g, err := s.TakeTokens(ctx, "r", 1)
		if err == nil && !g.Granted {
			err = errors.New("not granted")
		}
		return err
	}))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}

// TestAdvUnboundedNewKeyBehindAnOpenCompletion: a completion of a job of
// u (no bound) is held open in a caller's transaction; PutLimit(u) gives
// u a bound and, in its "one" pass, waits for u's row. It must not hold
// the limits' lock meanwhile: a second limit change (of an unrelated key)
// would queue for it exclusively, and a claim that must create the row of
// a new key n:1 (template n*, no bound) tries the lock shared, which
// fails behind a queued exclusive request, so the claim would pass the
// new key over for as long as the caller keeps its completion open.
func TestAdvUnboundedNewKeyBehindAnOpenCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "n*"})
	got := unboundedKey(t, s, "u", 3)
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "u", Concurrency: 3})
		return err
	})
	ubWaitRowWaiters(t, s, 1)
	zctx, cancel := context.WithTimeout(ctx, withinAtLeast)
	defer cancel()
	if _, err := s.PutLimit(zctx, readpast.Limit{Key: "z", Concurrency: 2}); err != nil {
		t.Fatalf("PutLimit(z) beside a change waiting for a row: %v (it waited for the limits' lock)", err)
	}
	keyJobs(t, s, "n:1", "qn", 1)
	jobs := ubClaimAll(t, s, "wn", 1, "qn")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit(u)", withinAtLeast, put)
	if len(jobs) != 1 {
		t.Errorf("a claim took %d jobs of a new key without a bound, want 1: it passed the key over while a completion of another key was held open", len(jobs))
	}
	checkGroups(t, s)
}

// TestAdvUnboundedRepeatableReadCaller: a caller's REPEATABLE READ
// transaction takes its snapshot, then a claim of the same key (no bound)
// commits, then the caller completes its job (CompleteTx). The key's row
// changed after the snapshot by a non-key update only: the FOR KEY SHARE
// needs no newer version, the completion succeeds and the counts stay
// exact.
func TestAdvUnboundedRepeatableReadCaller(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 4)
	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_jobs LIMIT 1"); err != nil { // the snapshot
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w3", 1, "qa")); n != 1 {
		t.Fatalf("claimed %d", n)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatalf("CompleteTx under REPEATABLE READ: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	putLimit(t, s, readpast.Limit{Key: "u", Concurrency: 3})
	if r := ubRowOf(t, s, "u"); r.running != 2 || r.counts != 0 {
		t.Errorf("u's row: running %d counts %d; want 2, 0", r.running, r.counts)
	}
}
