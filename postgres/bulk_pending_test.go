package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestBulkCancelPendingRacingAClaim: a bulk action judges each job by
// its filter on the version it gets when it has the job's row. A
// BulkCancel{Queue: bq, State: pending} that reaches job 1 while a claim
// holds it (stopped before commit at claim.end) waits for the row; the
// claim commits first, so the job is running when the cancel has it, and
// a cancel of pending jobs leaves it, as if the claim had come first. The
// other two jobs are cancelled, and nothing is reported skipped: the
// cancel acted on every job that was pending when it had its row.
func TestBulkCancelPendingRacingAClaim(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "bq"}, {Kind: "k", Queue: "bq"}, {Kind: "k", Queue: "bq"}})
	if err != nil {
		t.Fatal(err)
	}
	st := newStall(t, s, "claim.end")
	claimDone := async(func() error {
		_, err := st.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"bq"}, Worker: "w", Limit: 1, Lease: time.Minute})
		return err
	})
	st.waitBlocked()
	var (
		n    int
		berr error
	)
	bulkDone := async(func() error {
		n, berr = s.BulkCancel(ctx, readpast.JobFilter{Queue: "bq", State: readpast.StatePending})
		return nil
	})
	waitLockWait(t, s) // the bulk cancel waits for job 1's row
	st.open()
	within(t, "the claim", 5*time.Second, claimDone)
	within(t, "BulkCancel", 5*time.Second, bulkDone)
	j := getJob(t, s, js[0].ID)
	t.Logf("BulkCancel returned %d, %v; job %d is %s", n, berr, j.ID, j.State)
	if j.State != readpast.StateRunning || berr != nil || n != 2 {
		t.Errorf("BulkCancel(state pending) returned %d, %v and job %d is %s; want 2, nil and the claimed job running (the claim came first)", n, berr, j.ID, j.State)
	}
}
