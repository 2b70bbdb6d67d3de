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
			case <-time.After(c.wait + 2*time.Second):
			}
			if c.wait > 0 {
				t.Fatalf("BulkCancel with a bound of %v did not return within 2 s of it", c.wait)
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
