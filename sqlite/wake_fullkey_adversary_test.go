package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/sqlite"
)

// TestAdvWakeCompleteSQLTxCommittedAfterNextStart: key g (concurrency
// 1, one start a 300 ms) is filled by a claim and out of tokens. The
// running job is completed by CompleteSQLTx in the caller's transaction,
// which is held open past g's next start (the handler's own writes take a
// while) and then commits. An alarm at the next start set at once would
// fire while the transaction is still open: the worker it wakes probes,
// sees nothing committed, and goes back to sleep. The alarm must be set
// once the transaction has ended (announceOnTxEnd), firing at once for a
// start that has passed.
func TestAdvWakeCompleteSQLTxCommittedAfterNextStart(t *testing.T) {
	replay.Windowed(t, func(t *testing.T) {
		ctx := context.Background()
		s := openTemp(t)
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 300 * time.Millisecond, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		js := aw2Enqueue(t, s, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "b", Group: "g"})
		got := aw2Claim(t, s, readpast.DefaultQueue, 10)
		if len(got) != 1 || got[0].ID != js[0].ID {
			t.Fatalf("first claim: %d jobs, want a", len(got))
		}
		next := replay.NextStart(t, s, "g", "g")
		ch, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := completeInOpenTx(ctx, t, s, got[0])
		if !time.Now().Before(next) {
			tx.Rollback()
			t.Skip("no window")
		}
		// The transaction stays open past the next start; the worker claims
		// at every wake-up meanwhile, as a worker would.
		hold := time.After(time.Until(next) + 200*time.Millisecond)
		wokeMeanwhile := 0
	wait:
		for {
			select {
			case <-ch:
				wokeMeanwhile++
				if early := aw2Claim(t, s, readpast.DefaultQueue, 10); len(early) != 0 {
					t.Fatalf("claimed %d jobs before the commit", len(early))
				}
			case <-hold:
				break wait
			}
		}
		t.Logf("woken %d times while the transaction was open", wokeMeanwhile)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		replay.Delivered(t, s, ch, readpast.DefaultQueue, js[1].ID, time.Now(), "the next job of a full key freed by a CompleteSQLTx committed after the next start")
	})
}

// TestAdvWakeCompleteSQLTxRolledBack: a CompleteSQLTx rolled back
// leaves the job running and the key full: the next job must not be
// claimable (a spurious alarm is fine).
func TestAdvWakeCompleteSQLTxRolledBack(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 200 * time.Millisecond, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	aw2Enqueue(t, s, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "b", Group: "g"})
	got := aw2Claim(t, s, readpast.DefaultQueue, 10)
	if len(got) != 1 {
		t.Fatalf("first claim: %d jobs", len(got))
	}
	if err := completeInOpenTx(ctx, t, s, got[0]).Rollback(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if again := aw2Claim(t, s, readpast.DefaultQueue, 10); len(again) != 0 {
		t.Fatalf("claimed %d jobs of a full key after a rolled-back completion", len(again))
	}
}

// completeInOpenTx completes job by CompleteSQLTx in a transaction of
// its own, which it returns open.
func completeInOpenTx(ctx context.Context, t *testing.T, s *sqlite.Store, job *readpast.Job) *sql.Tx {
	t.Helper()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: job.ID, Token: job.Token}); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	return tx
}

// TestAdvWakeSecondStoreFreesFullKey: two Store instances on one file
// (two processes: a worker and, say, an admin tool or a second service
// that cancels or completes jobs). The worker's store A claims a and
// fills key g (concurrency 1, one start a 500 ms), leaving it out of
// tokens. Store B ends a before g's next start, which marks b at that
// start. B's alarm wakes only B's claimers: A's must be woken by an
// alarm A's claim set at the next start of the key it filled.
func TestAdvWakeSecondStoreFreesFullKey(t *testing.T) {
	for _, how := range []string{"cancel", "complete"} {
		replay.Run(t, how, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "readpast.db")
			a, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			b, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			if _, err := a.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 500 * time.Millisecond, Burst: 1}); err != nil {
				t.Fatal(err)
			}
			js := aw2Enqueue(t, a, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "b", Group: "g"})
			ch, err := a.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := aw2Claim(t, a, readpast.DefaultQueue, 10)
			if len(got) != 1 || got[0].ID != js[0].ID {
				t.Fatalf("first claim: %d jobs, want a", len(got))
			}
			next := replay.NextStart(t, a, "g", "g")
			for len(ch) > 0 {
				<-ch
				aw2Claim(t, a, readpast.DefaultQueue, 10)
			}
			aw2Exit(t, b, how, got[0])
			if !time.Now().Before(next) {
				t.Skip("no window")
			}
			replay.Delivered(t, a, ch, readpast.DefaultQueue, js[1].ID, next, "the next job of a full key another store freed by a "+how)
		})
	}
}
