package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

func adv2Deadlocks(t *testing.T, tx interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRow(context.Background(), `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A finisher holding a full key's row FOR KEY SHARE (stalled at
// finish.group_rows) upgrades to NO KEY UPDATE while a limit change waits
// FOR UPDATE on that row (queued on the tuple lock behind a caller's open
// CompleteTx holding it NO KEY UPDATE). Lock upgrade beside a queued
// stronger waiter: the classic upgrade deadlock.
func TestAdvRoom2UpgradeBesideForUpdateWaiter(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	run := keyWithRunning(t, s, "a", 2, 4, 2) // a full
	before := adv2Deadlocks(t, s.Pool())
	t2, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Rollback(ctx)
	if _, err := t2.Exec(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, t2, readpast.Completion{ID: run[0].ID, Token: run[0].Token}); err != nil {
		t.Fatal(err) // a full: KEY SHARE + NO KEY UPDATE on a, slot back on the row, open
	}
	fin := newStallWith(t, s, "finish.group_rows", "", map[string]string{"deadlock_timeout": "50ms"})
	t1, err := fin.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback(ctx)
	done1 := async(func() error {
		return fin.store.CompleteTx(ctx, t1, readpast.Completion{ID: run[1].ID, Token: run[1].Token})
	})
	fin.waitBlocked() // holds a FOR KEY SHARE; a reads full (t2 uncommitted)
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "a", Concurrency: 5})
		return err
	})
	ubWaitRowWaiters(t, s, 1) // the limit change waits FOR UPDATE on a
	fin.open()
	ubWaitRowWaiters(t, s, 2) // the finisher waits NO KEY UPDATE on a
	time.Sleep(300 * time.Millisecond)
	if err := t2.Commit(ctx); err != nil {
		t.Fatalf("t2 commit: %v", err)
	}
	select {
	case err := <-done1:
		if err != nil {
			t.Fatalf("the stalled finisher: %v (deadlock %v)", err, isDeadlock(err))
		}
	case <-time.After(withinAtLeast):
		t.Fatal("the stalled finisher did not return")
	}
	if err := t1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit", withinAtLeast, put)
	time.Sleep(1200 * time.Millisecond) // stats flush
	if d := adv2Deadlocks(t, s.Pool()) - before; d != 0 {
		t.Errorf("%d deadlocks detected", d)
	}
	checkGroups(t, s)
	r := ubRowOf(t, s, "a")
	t.Logf("a: running %d counts %d max %d", r.running, r.counts, r.maxRunning)
	if n := len(ubClaimAll(t, s, "w3", 10, "qa")); n != 2 {
		t.Errorf("claimed %d of a (0 of 5 running, 2 pending), want 2", n)
	}
	checkGroups(t, s)
}

// Two caller transactions complete jobs naming [a, b] and [b, a], both
// keys full; the first stops after its KEY SHARE locks (finish.group_rows),
// the second completes and stays open; a limit change of a template over
// both waits; then the first goes on, the second commits.
func TestAdvRoom2TwoFullKeysOppositeOrders(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "k*", Concurrency: 2})
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qa", Keys: []string{"ka", "kb"}},
		{Kind: "k", Queue: "qa", Keys: []string{"kb", "ka"}},
		{Kind: "k", Queue: "qa", Keys: []string{"ka"}},
		{Kind: "k", Queue: "qa", Keys: []string{"kb"}},
	}); err != nil {
		t.Fatal(err)
	}
	got := ubClaimAll(t, s, "w", 2, "qa")
	if len(got) != 2 {
		t.Fatalf("claimed %d, want 2", len(got))
	}
	checkGroups(t, s)
	before := adv2Deadlocks(t, s.Pool())
	fin := newStallWith(t, s, "finish.group_rows", "", map[string]string{"deadlock_timeout": "50ms"})
	var txs []pgx.Tx
	var dones []<-chan error
	for i, j := range got {
		st := s
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
			fin.waitBlocked()
		}
	}
	within(t, "the second completion", withinAtLeast, dones[1])
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "k*", Concurrency: 1})
		return err
	})
	ubWaitRowWaiters(t, s, 1)
	fin.open()
	time.Sleep(300 * time.Millisecond)
	if err := txs[1].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-dones[0]:
		if err != nil {
			t.Fatalf("the first completion: %v (deadlock %v)", err, isDeadlock(err))
		}
	case <-time.After(withinAtLeast):
		t.Fatal("the first completion did not return")
	}
	if err := txs[0].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit", withinAtLeast, put)
	time.Sleep(1200 * time.Millisecond)
	if d := adv2Deadlocks(t, s.Pool()) - before; d != 0 {
		t.Errorf("%d deadlocks detected", d)
	}
	checkGroups(t, s)
	if n := len(ubClaimAll(t, s, "w3", 10, "qa")); n != 2 {
		t.Errorf("claimed %d (ka, kb each 1 pending, limit 1), want 2", n)
	}
	checkGroups(t, s)
}

// P4: a completion of a job naming [a, b], a with room, b full, held open
// in a caller's transaction: a claim must take a's own job meanwhile.
func TestAdvRoom2RoomyFirstKeyBesideFullLaterKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "a", Concurrency: 3})
	putLimit(t, s, readpast.Limit{Key: "b", Concurrency: 1})
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "qa", Keys: []string{"a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	got := ubClaimAll(t, s, "w", 1, "qa")
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	keyJobs(t, s, "a", "qb", 2)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w2", 5, "qb")); n != 2 {
		t.Errorf("claim of a beside the open completion took %d, want 2", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}
