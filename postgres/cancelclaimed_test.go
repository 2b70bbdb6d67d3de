package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestCancelClaimedRacingARescue replays a worker cancelling its job (a
// handler's Cancel) while the rescue of its expired lease holds the job's
// row, stopped before its commit (rescue.end): the cancel's snapshot
// still shows the job running under the worker's token, and its DELETE
// waits for the rescue's row lock.
//
//   - CancelClaimed: PostgreSQL re-checks the token on the row as the
//     rescue committed it, pending with no claim, so it matches nothing:
//     ErrStaleToken, and the job stays pending for the next worker.
//   - Cancel, for contrast (what a worker sent before CancelClaimed): it
//     cancels the job the rescue has just made pending again.
func TestCancelClaimedRacingARescue(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		cancel  func(s *postgres.Store, j *readpast.Job) (*readpast.Job, error)
		refused bool
	}{
		{"CancelClaimed", func(s *postgres.Store, j *readpast.Job) (*readpast.Job, error) {
			return s.CancelClaimed(ctx, j.ID, j.Token)
		}, true},
		{"Cancel", func(s *postgres.Store, j *readpast.Job) (*readpast.Job, error) { return s.Cancel(ctx, j.ID) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "cr", Group: "crg"}}); err != nil {
				t.Fatal(err)
			}
			const lease = 100 * time.Millisecond
			a, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"cr"}, Worker: "a", Limit: 1, Lease: lease})
			if err != nil || len(a) != 1 {
				t.Fatalf("claim: %v, %v", a, err)
			}
			time.Sleep(lease + 50*time.Millisecond)
			cancelled, cerr := cancelBehind(t, s, "rescue.end", "the rescue", func(st *postgres.Store) error {
				n, err := st.RescueExpired(ctx, 10)
				if err == nil && n != 1 {
					err = errors.New("the rescue ended no claim")
				}
				return err
			}, func() (*readpast.Job, error) { return tc.cancel(s, a[0]) }, func() {
				if j := getJob(t, s, a[0].ID); j.State != readpast.StateRunning || j.Token != a[0].Token {
					t.Fatalf("before the rescue commits the job is %s under %q, want running under the worker's token", j.State, j.Token)
				}
			})

			got := getJob(t, s, a[0].ID)
			if tc.refused {
				if !errors.Is(cerr, readpast.ErrStaleToken) || cancelled != nil {
					t.Fatalf("%s racing the rescue: %+v, %v; want ErrStaleToken", tc.name, cancelled, cerr)
				}
				if got.State != readpast.StatePending {
					t.Fatalf("after a refused %s the job is %s, want pending (rescued)", tc.name, got.State)
				}
				b, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"cr"}, Worker: "b", Limit: 1, Lease: time.Minute})
				if err != nil || len(b) != 1 || b[0].ID != a[0].ID {
					t.Fatalf("the next worker's claim: %v, %v; want the rescued job", b, err)
				}
			} else if cerr != nil || got.State != readpast.StateCancelled {
				t.Fatalf("%s racing the rescue: %v, the job %s; want the rescued job cancelled", tc.name, cerr, got.State)
			}
			checkGroups(t, s)
		})
	}
}
