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

// The windows of a key without a concurrency bound, whose completions
// take its row FOR KEY SHARE and count the slots they free beside it
// (fragments/free_slots.sql, migrations/0022): a claim beside a
// completion held open; a limit that bounds the key while a completion
// holds its row, or while a completion's snapshot still shows it
// unbounded; a limit change beside a completion that holds one key's row
// and waits for another's.

// unboundedKey declares key with no bound, enqueues n jobs of it in qa
// and claims two of them, one a claim.
func unboundedKey(t *testing.T, s *postgres.Store, key string, n int) []*readpast.Job {
	t.Helper()
	putLimit(t, s, readpast.Limit{Key: key})
	keyJobs(t, s, key, "qa", n)
	var got []*readpast.Job
	for _, w := range []string{"w1", "w2"} {
		jobs := claimWithin(t, "a claim", withinAtLeast, s, claimQ(w, 1, "qa"))
		if len(jobs) != 1 {
			t.Fatalf("claim %s took %d jobs of %s, want 1", w, len(jobs), key)
		}
		got = append(got, jobs...)
	}
	return got
}

// completeHeldOpen completes j with CompleteTx in a transaction it
// begins on s and leaves open, holding what the completion locked, for
// the caller to commit or roll back.
func completeHeldOpen(t *testing.T, s *postgres.Store, j *readpast.Job) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token}); err != nil {
		tx.Rollback(ctx)
		t.Fatal(err)
	}
	return tx
}

// keyRunning returns the running count GetLimit reports for key, which
// has a limit of its own.
func keyRunning(t *testing.T, s *postgres.Store, key string) int {
	t.Helper()
	return keyRunningOf(t, s, key, key)
}

// keyRunningOf returns the running count GetLimit(limit) reports for key.
func keyRunningOf(t *testing.T, s *postgres.Store, limit, key string) int {
	t.Helper()
	li, err := s.GetLimit(context.Background(), limit)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range li.Keys {
		if k.Key == key {
			return k.Running
		}
	}
	t.Fatalf("GetLimit(%s) has no state of the key: %+v", key, li.Keys)
	return 0
}

// TestClaimBesideACompletionOfAnUnboundedKey: a completion of a job of a
// key without a bound, held open in the caller's transaction, holds the
// key's row FOR KEY SHARE only; a claim takes the key's next job beside
// it. Giving the slot back on the row (as for a key with a bound) would
// hold the row FOR NO KEY UPDATE, and the claim would pass the key over.
func TestClaimBesideACompletionOfAnUnboundedKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 4)
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	jobs := claimWithin(t, "a claim beside a completion held open", withinAtLeast, s, claimQ("w3", 1, "qa"))
	if len(jobs) != 1 {
		t.Fatalf("a claim beside a held-open completion of the key took %d jobs, want 1: it passed the key over", len(jobs))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if n := keyRunning(t, s, "u"); n != 2 {
		t.Fatalf("GetLimit says %d running, want 2", n)
	}
}

// TestBoundGivenWhileACompletionHoldsTheKey: a completion of a job of an
// unbounded key is held open (the key's row FOR KEY SHARE, its freed
// slot counted beside the row, uncommitted); a limit of concurrency 2
// for the key waits for it, and, once it commits, folds the count into
// the row before it lets the row go: of the two jobs claimed, one runs,
// so exactly one more may start. Without the fold, the row would still
// count two running, and the key would look full.
func TestBoundGivenWhileACompletionHoldsTheKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 4)
	tx := completeHeldOpen(t, s, got[0])
	defer tx.Rollback(ctx)
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "u", Concurrency: 2})
		return err
	})
	select {
	case err := <-put:
		t.Fatalf("PutLimit returned (%v) while a completion held the key's row: it cannot have folded its count", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "PutLimit once the completion committed", withinAtLeast, put)
	checkGroups(t, s)
	if n := keyRunning(t, s, "u"); n != 1 {
		t.Fatalf("GetLimit says %d running, want 1", n)
	}
	if jobs := claimWithin(t, "a claim", withinAtLeast, s, claimQ("w3", 10, "qa")); len(jobs) != 1 {
		t.Fatalf("a claim took %d jobs of a key with 1 of 2 running, want 1", len(jobs))
	}
	if jobs := claimWithin(t, "a claim", withinAtLeast, s, claimQ("w4", 10, "qa")); len(jobs) != 0 {
		t.Fatalf("a claim took %d jobs of a full key", len(jobs))
	}
	checkGroups(t, s)
}

// TestCompletionSeesABoundGivenMeanwhile: a completion stops after its
// snapshot, in which the key has no bound, before it locks the key's row
// ("finish.key_share"); a limit of concurrency 2 for the key commits
// meanwhile (it folds nothing: no count yet). The completion must judge
// the row it locked, which has a bound, and give the slot back on it:
// counted beside the row, the slot would stay taken until Tidy, and the
// key, two running on its row with one job running, would look full.
func TestCompletionSeesABoundGivenMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := unboundedKey(t, s, "u", 4)
	fin := newStall(t, s, "finish.key_share")
	done := async(func() error {
		errs, err := fin.store.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}})
		return first(errs, err)
	})
	fin.waitBlocked()
	putLimit(t, s, readpast.Limit{Key: "u", Concurrency: 2})
	fin.open()
	within(t, "the completion", withinAtLeast, done)
	checkGroups(t, s)
	if jobs := claimWithin(t, "a claim", withinAtLeast, s, claimQ("w3", 10, "qa")); len(jobs) != 1 {
		t.Fatalf("a claim took %d jobs of a key with 1 of 2 running, want 1", len(jobs))
	}
	checkGroups(t, s)
}

// TestLimitChangeBesideACompletionOfTwoKeys: a job names b:1, which has a
// bound, and b:2, which has none. Its completion holds b:2's row FOR KEY
// SHARE and stops before it takes b:1's ("finish.group_rows"); a change
// of the template b:* (b:2's limit) passes b:2's row over under the
// limits' lock, then waits for it. Holding b:1's row while it waits, the
// change and the completion would wait for each other: the completion,
// in a transaction whose deadlock_timeout is short, would be the one
// PostgreSQL cancels. The change waits for one row at a time, holding
// none: both go through.
func TestLimitChangeBesideACompletionOfTwoKeys(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "b:*"})
	putLimit(t, s, readpast.Limit{Key: "b:1", Concurrency: 1}) // full while its job runs: the slot goes back on its row
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "qa", Keys: []string{"b:1", "b:2"}}}); err != nil {
		t.Fatal(err)
	}
	got := claimWithin(t, "a claim", withinAtLeast, s, claimQ("w", 1, "qa"))
	if len(got) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got))
	}
	fin := newStall(t, s, "finish.group_rows")
	tx, err := fin.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '100ms'"); err != nil {
		t.Fatal(err)
	}
	done := async(func() error {
		return fin.store.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token})
	})
	fin.waitBlocked() // b:2's row held FOR KEY SHARE
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "b:*", Weight: 2})
		return err
	})
	waitForLockWait(t, s, "readpast_groups")
	fin.open()
	within(t, "the completion", withinAtLeast, done)
	if err := tx.Commit(ctx); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			t.Fatalf("the completion and the limit change waited for each other: %v", err)
		}
		t.Fatal(err)
	}
	within(t, "PutLimit once the completion committed", withinAtLeast, put)
	checkGroups(t, s)
	if n := keyRunning(t, s, "b:1"); n != 0 {
		t.Errorf("GetLimit(b:1) says %d running, want 0", n)
	}
	if n := keyRunningOf(t, s, "b:*", "b:2"); n != 0 {
		t.Errorf("GetLimit(b:*) says b:2 has %d running, want 0", n)
	}
}

// waitForLockWait returns once a session of s's database waits for a row
// lock of table.
func waitForLockWait(t *testing.T, s *postgres.Store, table string) {
	t.Helper()
	deadline := time.Now().Add(withinAtLeast)
	for {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l
			WHERE NOT l.granted AND (l.locktype = 'transactionid'
			   OR (l.locktype = 'tuple' AND l.relation = $1::regclass))`, table).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody waits for a row of %s", table)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
