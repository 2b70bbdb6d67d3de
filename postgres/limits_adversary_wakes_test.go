package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

// Adversarial tests of limits per key (docs/design/flow-control.md),
// written by a second reviewer; postgres/limits_adversary_test.go holds
// another reviewer's.

// TestAdversaryThrottledKeyWakesAProcessStartedAfterItsClaim: "a key out
// of tokens ... its jobs start when it can: workers are woken at its next
// start, whatever their poll interval". The claim that throttles a key
// announces the key's next start once, with a "due:" NOTIFY, to the
// processes listening then. A worker process that starts listening later
// (a deploy, a restart, a listener that reconnects) reads the upcoming
// due times from the jobs' run_at only (due_upcoming.sql): the throttled
// key's next job is already due by its run_at, and its next start lives
// only in its ready mark, so the process sets no alarm and the job waits
// for the poll (a minute here).
//
// Control: the same worker process listening before the claim starts the
// job at the key's next start.
func TestAdversaryThrottledKeyWakesAProcessStartedAfterItsClaim(t *testing.T) {
	for _, later := range []bool{false, true} {
		name := "worker listening before the claim"
		if later {
			name = "worker started after the claim"
		}
		t.Run(name, func(t *testing.T) {
			u := pgtest.URL(t)
			a := pgharness.Open(t, u) // the process that claims and throttles the key
			ctx := context.Background()
			t.Cleanup(func() { a.Close() })
			var (
				b       *postgres.Store
				started <-chan time.Time
			)
			if !later {
				b = pgharness.Open(t, u) // listening before the claim
				t.Cleanup(func() { b.Close() })
				started, _ = storetest.DueClient(t, b, false) // kind "due" in queue q, poll interval a minute
				waitListeners(t, a, 1)
			}
			putLimit(t, a, readpast.Limit{Key: "api", Rate: 1, Per: 1500 * time.Millisecond, Burst: 1})
			if _, err := a.Enqueue(ctx, []readpast.EnqueueParams{
				{Kind: "hold", Queue: "h", Group: "api", Priority: -1}, // a claims it
				{Kind: "due", Queue: "q", Group: "api"},                // DueClient runs it
			}); err != nil {
				t.Fatal(err)
			}
			// (b's claimers, woken by the enqueue, may hold the key's row
			// for a moment: a claim passes it over then.)
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				got, err := a.Claim(ctx, claimQ("a", 1, "h"))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("a did not claim the key's first job")
				}
			}
			var next time.Time
			if err := a.Pool().QueryRow(ctx, `SELECT max(run_at) FROM readpast_group_ready
				WHERE group_key = 'api' AND run_at > now()`).Scan(&next); err != nil {
				t.Fatalf("the key's mark at its next start: %v", err)
			}
			if later {
				b = pgharness.Open(t, u) // another process, started after the claim
				t.Cleanup(func() { b.Close() })
				started, _ = storetest.DueClient(t, b, false)
			}
			t.Logf("key throttled until %v (in %v)", next, time.Until(next).Round(time.Millisecond))
			storetest.StartsWithin(t, started, next, 500*time.Millisecond,
				"the next job of a throttled key, "+name)
		})
	}
}

// waitListeners returns once n stores listen on s's database.
func waitListeners(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var got int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND `+listenerSession).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stores listen, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLimitLockWaiters returns once n transactions wait for the limits'
// lock (advisory 1919181686, 0).
func waitLimitLockWaiters(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		var got int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid = 1919181686 AND objid = 0 AND objsubid = 2`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions wait for the limits' lock, want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAdversarySetGroupLimitRevertsAConcurrentPutLimit: SetGroupLimit
// "declares group's own limit with concurrency limit, keeping a rate it
// has". On PostgreSQL it reads the current limit (GetLimit) before it
// takes the limits' lock, and writes that read back under the lock: a
// PutLimit that commits in between is undone. Here PutLimit lowers the
// key's rate from 10/s to 1/s and returns; SetGroupLimit(api, 5), which
// began before PutLimit committed and waited for its lock, then puts
// back 10/s. No serial order of the two calls gives rate 10 with
// concurrency 5: PutLimit then SetGroupLimit keeps rate 1, SetGroupLimit
// then PutLimit ends with concurrency 2. (SQLite reads and writes in one
// write transaction and has no such window.)
func TestAdversarySetGroupLimitRevertsAConcurrentPutLimit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 2, Rate: 10, Per: time.Second})
	put := newStall(t, s, "limit.put")
	lowered := async(func() error {
		_, err := put.store.PutLimit(ctx, readpast.Limit{Key: "api", Concurrency: 2, Rate: 1, Per: time.Second})
		return err
	})
	put.waitBlocked() // PutLimit holds the limits' lock, about to write rate 1
	set := async(func() error { return s.SetGroupLimit(ctx, "api", 5) })
	waitLimitLockWaiters(t, s, 1) // SetGroupLimit read rate 10 and waits for the lock
	put.open()
	within(t, "PutLimit", 2*time.Second, lowered)
	within(t, "SetGroupLimit", 2*time.Second, set)
	got, err := s.GetLimit(ctx, "api")
	if err != nil {
		t.Fatal(err)
	}
	if got.Rate != 1 || got.Concurrency != 5 {
		t.Fatalf("after PutLimit(rate 1/s) returned and SetGroupLimit(api, 5) then returned: concurrency %d, rate %d per %v; "+
			"want concurrency 5 and the rate PutLimit set (1/s): SetGroupLimit wrote back the rate it read before PutLimit committed",
			got.Concurrency, got.Rate, got.Per)
	}
}

// TestAdversaryFinishMarksAKeyOutOfTokensDue: "a key out of tokens ...
// costs claims nothing until it can start a job" (flow-control.md: a
// claim marks it at its next start, and claims walk only due marks).
// A key with no concurrency bound and no token left has its next job
// marked at its next start, an hour ahead. One of its running jobs
// completes: the trigger on readpast_groups (migrations/0008) marks the
// key's next job due now, because its free slots went up, whatever its
// tokens. The next claim walks that mark, locks the key's row, takes
// nothing, and marks it again: one wasted look (the claim routine's full
// plan instead of its ungrouped one) per completion of a throttled key.
func TestAdversaryFinishMarksAKeyOutOfTokensDue(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 2})
	keyJobs(t, s, "api", "q", 3)
	got, err := s.Claim(ctx, claimQ("w", 10, "q"))
	if err != nil || len(got) != 2 {
		t.Fatalf("claimed %d, want the burst of 2", len(got))
	}
	due := func() int {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM readpast_group_ready
			WHERE group_key = 'api' AND run_at <= now()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := due(); n != 0 {
		t.Fatalf("%d due marks of a key out of tokens right after the claim", n)
	}
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil {
		t.Fatal(err)
	}
	if n := due(); n != 0 {
		t.Errorf("a completion gave the key, out of tokens for an hour, %d due mark(s): the next claim pays a look for nothing", n)
	}
	if more, err := s.Claim(ctx, claimQ("w", 10, "q")); err != nil || len(more) != 0 {
		t.Fatalf("claimed %d, %v from a key out of tokens", len(more), err)
	}
}

// TestAdversaryLimitChangeHeldByAnOpenFinisherStallsEveryNewKey: a
// PutLimit of template c:* waits (apply_limit.sql, FOR UPDATE) for a key
// row of c:* that a caller's open transaction holds after CompleteTx, and
// meanwhile holds the limits' lock exclusively. The lock is global: until
// the caller's transaction ends, however long, no claim creates the row
// of ANY key (readpast_key_limit's try-lock fails: "a key whose limit is
// being changed is passed over", but z's limit is not being changed), and
// TakeTokens of any key without a row waits. A job of an unrelated key,
// with its slot and its tokens free, does not start.
func TestAdversaryLimitChangeHeldByAnOpenFinisherStallsEveryNewKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 2})
	keyJobs(t, s, "c:1", "q", 1)
	got, err := s.Claim(ctx, claimQ("w", 10, "q"))
	if err != nil || len(got) != 1 {
		t.Fatalf("claimed %v, %v", got, err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatal(err)
	}
	// The caller's transaction stays open (its own work after the completion).
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 3})
		return err
	})
	time.Sleep(300 * time.Millisecond) // PutLimit holds the limits' lock and waits for c:1's row
	keyJobs(t, s, "z", "q", 1)         // a key no limit names: no row yet
	if more := claimWithin(t, "a claim", time.Second, s, claimQ("w", 10, "q")); len(more) != 1 {
		t.Errorf("claimed %d jobs of key z (no limit, nothing running) while a PutLimit of c:* waited for an open transaction; want 1", len(more))
	}
	take := async(func() error {
		_, err := s.TakeTokens(ctx, "y", 1)
		return err
	})
	took := false
	select {
	case err := <-take:
		took = true
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Second):
		t.Errorf("TakeTokens of key y (no limit) waited over 1s for a PutLimit of c:* held by an open transaction")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit", 2*time.Second, put)
	if !took {
		<-take
	}
	if info, err := s.GetLimit(ctx, "c:*"); err != nil || len(info.Keys) != 1 || info.Keys[0].Concurrency != 3 {
		t.Errorf("after the open transaction ended, c:* keys %+v (%v), want c:1 at concurrency 3", info, err)
	}
}
