package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestCancelPendingRacingAClaim replays a cancel meeting a claim of the
// same pending job, with the claim stopped before its commit (claim.end),
// holding the job's row: the cancel reads the job as pending in its
// snapshot, and its DELETE waits for the claim's row lock.
//
//   - CancelPending: PostgreSQL re-checks "only pending" on the row as the
//     claim committed it, so it matches nothing, and CancelPending refuses
//     the job, running, with ErrInvalidState. The job stays running under
//     the claim's token, and its worker completes it.
//   - Cancel, for contrast: it cancels the job the claim has just
//     started, and the worker's completion finds its token stale.
func TestCancelPendingRacingAClaim(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		cancel   func(s *postgres.Store, id int64) (*readpast.Job, error)
		refused  bool
		complete error
	}{
		{"CancelPending", func(s *postgres.Store, id int64) (*readpast.Job, error) { return s.CancelPending(ctx, id) }, true, nil},
		{"Cancel", func(s *postgres.Store, id int64) (*readpast.Job, error) { return s.Cancel(ctx, id) }, false, readpast.ErrStaleToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			job, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "cq", Group: "cg"}})
			if err != nil {
				t.Fatal(err)
			}
			var claimed []*readpast.Job
			cancelled, cerr := cancelBehind(t, s, "claim.end", "the claim", func(st *postgres.Store) (err error) {
				claimed, err = st.Claim(ctx, readpast.ClaimParams{Queues: []string{"cq"}, Worker: "w", Limit: 1, Lease: time.Minute})
				if err == nil && len(claimed) != 1 {
					err = errors.New("the claim took no job")
				}
				return err
			}, func() (*readpast.Job, error) { return tc.cancel(s, job[0].ID) }, func() {
				if j := getJob(t, s, job[0].ID); j.State != readpast.StatePending {
					t.Fatalf("before the claim commits the job is %s, want pending", j.State)
				}
			})

			got := getJob(t, s, job[0].ID)
			if tc.refused {
				if !errors.Is(cerr, readpast.ErrInvalidState) || !strings.Contains(cerr.Error(), "running") || cancelled != nil {
					t.Fatalf("%s racing the claim: %+v, %v; want ErrInvalidState naming running", tc.name, cancelled, cerr)
				}
				if got.State != readpast.StateRunning || got.Token != claimed[0].Token || got.Attempt != 1 {
					t.Fatalf("job is %s under token %q, attempt %d; want it running under the claim's token %q", got.State, got.Token, got.Attempt, claimed[0].Token)
				}
			} else if cerr != nil || got.State != readpast.StateCancelled {
				t.Fatalf("%s racing the claim: %v, the job %s; want the running job cancelled", tc.name, cerr, got.State)
			}
			checkGroups(t, s)
			errs, err := s.Complete(ctx, []readpast.Completion{{ID: claimed[0].ID, Token: claimed[0].Token}})
			if err != nil || len(errs) != 1 || !errors.Is(errs[0], tc.complete) {
				t.Fatalf("the worker's completion: %v, %v; want %v", errs, err, tc.complete)
			}
			checkGroups(t, s)
		})
	}
}

// cancelBehind replays a cancel beside a statement that holds the job's
// row: hold runs on a store stalled at point (before its commit) until it
// holds the row uncommitted, then cancel runs until its DELETE waits for
// that row, and before checks what the cancel's snapshot shows. The stall
// then opens; cancelBehind returns the cancel's answer once both are done.
func cancelBehind(t *testing.T, s *postgres.Store, point, what string, hold func(*postgres.Store) error,
	cancel func() (*readpast.Job, error), before func()) (*readpast.Job, error) {
	t.Helper()
	st := newStall(t, s, point)
	holdDone := async(func() error { return hold(st.store) })
	st.waitBlocked()
	var (
		job *readpast.Job
		err error
	)
	cancelDone := async(func() error {
		job, err = cancel()
		return nil
	})
	waitLockWait(t, s)
	before()
	st.open()
	within(t, what, 5*time.Second, holdDone)
	within(t, "the cancel", 5*time.Second, cancelDone)
	return job, err
}
