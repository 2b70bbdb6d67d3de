package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Adversarial replays of limit changes giving key rows their limits
// (postgres/limits.go changeLimits; apply_limit.sql "skip" and "one").

// lrLimitOf returns key's row's limit key ("<nil>" for none) and
// max_running.
func lrLimitOf(t *testing.T, s *postgres.Store, key string) (string, int) {
	t.Helper()
	r := ubRowOf(t, s, key)
	lk := "<nil>"
	if r.limitKey != nil {
		lk = *r.limitKey
	}
	return lk, r.maxRunning
}

func lrWantLimit(t *testing.T, s *postgres.Store, key, limitKey string, maxRunning int) {
	t.Helper()
	if lk, mr := lrLimitOf(t, s, key); lk != limitKey || mr != maxRunning {
		t.Errorf("key %s: row has limit %s, max_running %d; want %s, %d", key, lk, mr, limitKey, maxRunning)
	}
}

// TestAdvLimitRowsSkipPhaseBehindAQueuedChange: a change of the template
// u* holds the limits' lock exclusively (stalled at limit.put); a second
// change, of an unrelated key z, queues for the lock exclusively. The
// first change's "skip" statement runs readpast_key_limit, which tries
// the lock shared; PostgreSQL refuses a try-lock that conflicts with a
// queued request even to the session holding the lock exclusively, so
// k.ok is false for every row, and `WHERE k.ok` drops them: neither
// changed nor passed over. No row is held by anyone: u:1 and u:2 must end
// with u*'s new limit.
func TestAdvLimitRowsSkipPhaseBehindAQueuedChange(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u*", Concurrency: 1})
	keyJobs(t, s, "u:1", "qa", 2)
	keyJobs(t, s, "u:2", "qa", 2)
	if n := len(ubClaimAll(t, s, "w", 10, "qa")); n != 2 {
		t.Fatalf("claimed %d, want 2 (one a key)", n)
	}
	lrWantLimit(t, s, "u:1", "u*", 1)
	st := newStall(t, s, "limit.put")
	first := async(func() error {
		_, err := st.store.PutLimit(ctx, readpast.Limit{Key: "u*", Concurrency: 3})
		return err
	})
	st.waitBlocked() // holds the limits' lock exclusively
	second := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "z", Concurrency: 2})
		return err
	})
	ubWaitLimitsLockWaiter(t, s) // queued for it exclusively
	st.open()
	within(t, "PutLimit(u*)", withinAtLeast, first)
	within(t, "PutLimit(z)", withinAtLeast, second)
	lrWantLimit(t, s, "u:1", "u*", 3)
	lrWantLimit(t, s, "u:2", "u*", 3)
	checkGroups(t, s)
	if n := len(ubClaimAll(t, s, "w2", 10, "qa")); n != 2 {
		t.Errorf("a claim took %d jobs of u:1, u:2 (limit 3, 1 running each), want 2", n)
	}
}

// TestAdvLimitRowsExactKeyBehindAQueuedDelete: the same window with an
// exact key and DeleteLimit: SetGroupLimit(u:1, 4) holds the limits' lock
// (stalled at limit.put) and DeleteLimit of an unrelated limit queues for
// it. u:1 must end with its own limit of 4 (it had its template's, 1).
func TestAdvLimitRowsExactKeyBehindAQueuedDelete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u*", Concurrency: 1})
	putLimit(t, s, readpast.Limit{Key: "zz", Concurrency: 1})
	keyJobs(t, s, "u:1", "qa", 3)
	if n := len(ubClaimAll(t, s, "w", 10, "qa")); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	st := newStall(t, s, "limit.put")
	set := async(func() error { return st.store.SetGroupLimit(ctx, "u:1", 4) })
	st.waitBlocked()
	del := async(func() error { return s.DeleteLimit(ctx, "zz") })
	ubWaitLimitsLockWaiter(t, s)
	st.open()
	within(t, "SetGroupLimit(u:1)", withinAtLeast, set)
	within(t, "DeleteLimit(zz)", withinAtLeast, del)
	lrWantLimit(t, s, "u:1", "u:1", 4)
	checkGroups(t, s)
}

// TestAdvLimitRowsKeyShareBesideUncommittedBound: a completion of a job
// of u (no bound) takes its snapshot (u unbounded) and stops before its
// FOR KEY SHARE (finish.key_share); a PutLimit giving u a bound of 2 has
// updated u's row under FOR UPDATE and stops in its fold (fold.rows),
// uncommitted. The completion goes on: a KEY SHARE lock does not conflict
// with a non-key update, so unless the row's FOR UPDATE survives the
// update, it takes the old version without waiting and counts its slot
// beside a row that is about to be bounded, after the change's fold took
// its snapshot. u's row must end exact (1 running, no counts), and a
// claim must get the free slot.
func TestAdvLimitRowsKeyShareBesideUncommittedBound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 5) // 2 running
	fin := newStall(t, s, "finish.key_share")
	done := async(func() error {
		return first(fin.store.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}))
	})
	fin.waitBlocked()
	chg := newStall(t, s, "fold.rows")
	put := async(func() error {
		_, err := chg.store.PutLimit(ctx, readpast.Limit{Key: "u", Concurrency: 2})
		return err
	})
	chg.waitBlocked() // u's row updated to a bound of 2, uncommitted
	fin.open()
	time.Sleep(300 * time.Millisecond) // the completion takes its lock, or waits
	chg.open()
	within(t, "PutLimit", withinAtLeast, put)
	within(t, "the completion", withinAtLeast, done)
	checkGroups(t, s)
	if r := ubRowOf(t, s, "u"); r.maxRunning != 2 || r.running != 1 || r.counts != 0 {
		t.Errorf("u's row: max_running %d running %d counts %d; want 2, 1, 0", r.maxRunning, r.running, r.counts)
	}
	if n := len(ubClaimAll(t, s, "w3", 10, "qa")); n != 1 {
		t.Errorf("a claim took %d jobs of u (1 of 2 running), want 1", n)
	}
	checkGroups(t, s)
}

// TestAdvLimitRowsThreeChangesBesideAnOpenCompletion: u* has no bound
// and u:1 a limit of its own; a caller's CompleteTx of a job of u:1 and
// u:2 (u:2 FOR KEY SHARE, u:1 FOR NO KEY UPDATE) stays open. PutLimit(u*,
// 2), PutLimit(u:1, 3) and then DeleteLimit(u:1) (u:1 falls back to u*)
// pass the rows over and wait for them, holding nothing. A claim
// that creates a new key's row (n:1) must not pass it over meanwhile.
// Once the caller commits every change returns, and both rows end with
// u*'s limit of 2 and exact counts.
func TestAdvLimitRowsThreeChangesBesideAnOpenCompletion(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "u*"})
	putLimit(t, s, readpast.Limit{Key: "n*"})
	putLimit(t, s, readpast.Limit{Key: "u:1", Concurrency: 5})
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qa", Keys: []string{"u:1", "u:2"}},
		{Kind: "k", Queue: "qa", Keys: []string{"u:1", "u:2"}},
	}); err != nil {
		t.Fatal(err)
	}
	got := ubClaimAll(t, s, "w", 2, "qa")
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	// Each change on a store of its own: a pool of 4 connections would
	// otherwise run out.
	s1, s2, s3 := newStall(t, s, "lr.none1").store, newStall(t, s, "lr.none2").store, newStall(t, s, "lr.none3").store
	p1 := async(func() error { _, err := s1.PutLimit(cctx, readpast.Limit{Key: "u*", Concurrency: 2}); return err })
	p2 := async(func() error { _, err := s2.PutLimit(cctx, readpast.Limit{Key: "u:1", Concurrency: 3}); return err })
	ubWaitRowWaiters(t, s, 2)
	del := async(func() error { return s3.DeleteLimit(cctx, "u:1") })
	ubWaitRowWaiters(t, s, 3) // its "one" waits for u:1 too, past its lock
	keyJobs(t, s, "n:1", "qn", 1)
	if n := len(ubClaimAll(t, s, "wn", 1, "qn")); n != 1 {
		t.Errorf("a claim took %d jobs of a new key while limit changes waited for rows, want 1", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the caller's commit: %v (deadlock: %v)", err, isDeadlock(err))
	}
	within(t, "PutLimit(u*)", withinAtLeast, p1)
	within(t, "PutLimit(u:1)", withinAtLeast, p2)
	within(t, "DeleteLimit(u:1)", withinAtLeast, del)
	lrWantLimit(t, s, "u:1", "u*", 2)
	lrWantLimit(t, s, "u:2", "u*", 2)
	checkGroups(t, s)
	for _, k := range []string{"u:1", "u:2"} {
		if r := ubRowOf(t, s, k); r.running != 1 || r.counts != 0 {
			t.Errorf("%s's row: running %d counts %d; want 1, 0", k, r.running, r.counts)
		}
	}
}
