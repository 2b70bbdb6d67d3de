package postgres_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestBulkCancelTakesAHeldJob: a claim has locked job 1 of queue bq and
// stops before it commits (claim.end), for longer than the bulk cancel's
// rounds of retries. BulkCancel(bq) must not return without job 1:
//   - waits: with the default bound it waits for the row, the claim
//     commits, and the cancel takes the job it claimed (3 cancelled);
//   - bound: with a bound shorter than the hold it returns what it did (2)
//     and a *readpast.SkippedError naming job 1.
//
// Before, it returned 2 with no error, and the claimed job ran on.
func TestBulkCancelTakesAHeldJob(t *testing.T) {
	for _, c := range []struct {
		name string
		wait time.Duration
	}{{"waits", 0}, {"bound", 200 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			if c.wait > 0 {
				postgres.SetBulkWait(s, c.wait)
			}
			js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "bq"}, {Kind: "k", Queue: "bq"}, {Kind: "k", Queue: "bq"}})
			if err != nil {
				t.Fatal(err)
			}
			st := newStall(t, s, "claim.end")
			var claimed []*readpast.Job
			claimDone := async(func() error {
				var err error
				claimed, err = st.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"bq"}, Worker: "w", Limit: 1, Lease: time.Minute})
				return err
			})
			st.waitBlocked()
			var (
				n    int
				berr error
			)
			bulkDone := async(func() error {
				n, berr = s.BulkCancel(ctx, readpast.JobFilter{Queue: "bq"})
				return nil
			})
			var skipped *readpast.SkippedError
			// With a bound, BulkCancel must return soon after it; the slack
			// is withinAtLeast, as for any statement that must not wait,
			// since the CI machine runs another package's tests beside
			// these (2 s was once not enough under -race).
			slack := 2 * time.Second
			if c.wait > 0 {
				slack = withinAtLeast
			}
			select {
			case <-bulkDone:
				st.open()
				within(t, "the claim", 5*time.Second, claimDone)
				if c.wait == 0 || !errors.As(berr, &skipped) || !slices.Equal(skipped.IDs, []int64{js[0].ID}) || n != 2 {
					t.Fatalf("BulkCancel returned %d, %v while job %d was held by a claim; want it to wait and cancel it, or name it", n, berr, js[0].ID)
				}
				if !errors.Is(berr, readpast.ErrSkipped) {
					t.Fatalf("the error %v is not ErrSkipped", berr)
				}
				if j := getJob(t, s, js[0].ID); j.State != readpast.StateRunning {
					t.Fatalf("the skipped job is %s, want running (its claim committed)", j.State)
				}
				return
			case <-time.After(c.wait + slack):
			}
			if c.wait > 0 {
				t.Fatalf("BulkCancel with a bound of %v did not return within %v of it", c.wait, slack)
			}
			waitLockWait(t, s) // the bulk cancel waits for job 1's row
			st.open()
			within(t, "the claim", 5*time.Second, claimDone)
			within(t, "BulkCancel", 5*time.Second, bulkDone)
			if n != 3 || berr != nil {
				t.Fatalf("BulkCancel returned %d, %v; want 3 and no error", n, berr)
			}
			if len(claimed) != 1 || claimed[0].ID != js[0].ID {
				t.Fatalf("the claim took %v, want job %d", ids(claimed), js[0].ID)
			}
			for _, j := range js {
				if got := getJob(t, s, j.ID); got.State != readpast.StateCancelled {
					t.Fatalf("job %d is %s after the bulk cancel, want cancelled", j.ID, got.State)
				}
			}
			errs, err := s.Complete(ctx, []readpast.Completion{{ID: claimed[0].ID, Token: claimed[0].Token}})
			if err != nil || len(errs) != 1 || !errors.Is(errs[0], readpast.ErrStaleToken) {
				t.Fatalf("the cancelled job's completion returned %v, %v; want ErrStaleToken", errs, err)
			}
		})
	}
}

func getJob(t *testing.T, s *postgres.Store, id int64) *readpast.Job {
	t.Helper()
	j, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestBulkRetryAndDeleteTakeAHeldJob: the same promise for the bulk actions
// on finished jobs. Another transaction holds job 1's history row (an
// operator's Retry or Delete, a retention prune) for longer than the bulk
// action's rounds of retries:
//   - waits: with the default bound the action waits for the row and acts
//     on all three jobs once the holder commits;
//   - bound: with a bound shorter than the hold it acts on the other two
//     and returns a *readpast.SkippedError naming job 1, which is left as
//     it was.
func TestBulkRetryAndDeleteTakeAHeldJob(t *testing.T) {
	for _, action := range []struct {
		name string
		bulk func(ctx context.Context, s *postgres.Store) (int, error)
		done readpast.JobState // a job's state once the action took it ("" for gone)
		left readpast.JobState // the held job's state when skipped
	}{
		{"retry",
			func(ctx context.Context, s *postgres.Store) (int, error) {
				return s.BulkRetry(ctx, readpast.JobFilter{Queue: "hq"})
			},
			readpast.StatePending, readpast.StateCancelled},
		{"delete",
			func(ctx context.Context, s *postgres.Store) (int, error) {
				return s.BulkDelete(ctx, readpast.JobFilter{Queue: "hq"})
			},
			"", readpast.StateCancelled},
	} {
		for _, c := range []struct {
			name string
			wait time.Duration
		}{{"waits", 0}, {"bound", 200 * time.Millisecond}} {
			t.Run(action.name+"/"+c.name, func(t *testing.T) {
				s := newStore(t)
				ctx := context.Background()
				if c.wait > 0 {
					postgres.SetBulkWait(s, c.wait)
				}
				js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "hq"}, {Kind: "k", Queue: "hq"}, {Kind: "k", Queue: "hq"}})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range js { // both actions apply to cancelled jobs
					if _, err := s.Cancel(ctx, j.ID); err != nil {
						t.Fatal(err)
					}
				}
				tx, err := s.Pool().Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_jobs_history WHERE id = $1 FOR UPDATE", js[0].ID); err != nil {
					t.Fatal(err)
				}
				var (
					n    int
					berr error
				)
				bulkDone := async(func() error {
					n, berr = action.bulk(ctx, s)
					return nil
				})
				state := func(id int64) readpast.JobState {
					j, err := s.Get(ctx, id)
					if errors.Is(err, readpast.ErrNotFound) {
						return ""
					}
					if err != nil {
						t.Fatal(err)
					}
					return j.State
				}
				if c.wait > 0 {
					within(t, "the bulk action", c.wait+5*time.Second, bulkDone)
					var skipped *readpast.SkippedError
					if !errors.As(berr, &skipped) || !errors.Is(berr, readpast.ErrSkipped) || !slices.Equal(skipped.IDs, []int64{js[0].ID}) || n != 2 {
						t.Fatalf("bulk %s returned %d, %v while job %d's row was held; want 2 and a SkippedError naming it", action.name, n, berr, js[0].ID)
					}
					if got := state(js[0].ID); got != action.left {
						t.Fatalf("the skipped job is %q, want %q", got, action.left)
					}
					return
				}
				waitLockWait(t, s) // the action waits for job 1's row
				select {
				case <-bulkDone:
					t.Fatalf("bulk %s returned %d, %v while job %d's row was still held", action.name, n, berr, js[0].ID)
				default:
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				within(t, "the bulk action", 5*time.Second, bulkDone)
				if n != 3 || berr != nil {
					t.Fatalf("bulk %s returned %d, %v; want 3 and no error", action.name, n, berr)
				}
				for _, j := range js {
					if got := state(j.ID); got != action.done {
						t.Fatalf("job %d is %q after bulk %s, want %q", j.ID, got, action.name, action.done)
					}
				}
			})
		}
	}
}
