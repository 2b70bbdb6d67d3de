package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestSnoozeRacingRescue: a job's lease has expired while its handler
// snoozes it, and the rescuer ends the claim at the same moment. Exactly
// one of them may act. Each order is replayed: one holds the job's row,
// stopped before its group row, while the other runs.
//   - rescue first: the snooze waits for the job's row, finds its token no
//     longer current and says so (ErrStaleToken); the job is pending,
//     its expired attempt recorded;
//   - snooze first: the rescue passes the held row over (SKIP LOCKED) and
//     finds nothing expired once the snooze commits; the job is pending at
//     its snoozed time, no attempt error recorded.
//
// Either way the group's slot is freed once, not twice.
func TestSnoozeRacingRescue(t *testing.T) {
	ctx := context.Background()
	const lease = 50 * time.Millisecond
	t.Run("rescue holds the row", func(t *testing.T) {
		s := newStore(t)
		defer s.Close()
		setupG(t, s, 1)
		head := takeHeadOfG(t, s, lease)
		time.Sleep(2 * lease) // the lease has expired
		rescuer := newStall(t, s, "finish.group_rows")
		rescued := async(func() error {
			n, err := rescuer.store.RescueExpired(ctx, 100)
			if err == nil && n != 1 {
				err = errors.New("the rescue ended no claim")
			}
			return err
		})
		rescuer.waitBlocked() // it holds the head's row, not yet G's
		snoozed := async(func() error { return s.Snooze(ctx, head.ID, head.Token, time.Hour) })
		waitForRowWaiter(t, s)
		rescuer.open()
		within(t, "the rescue", 2*time.Second, rescued)
		select {
		case err := <-snoozed:
			if !errors.Is(err, readpast.ErrStaleToken) {
				t.Errorf("the snooze after the rescue: %v, want ErrStaleToken", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the snooze did not return after the rescue committed")
		}
		j, err := s.Get(ctx, head.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != readpast.StatePending || len(j.Errors) != 1 || j.RunAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("after the rescue won: state %s, %d attempt errors, run at %s; want pending now with the expired attempt recorded",
				j.State, len(j.Errors), j.RunAt)
		}
		checkGroups(t, s)
	})
	t.Run("snooze holds the row", func(t *testing.T) {
		s := newStore(t)
		defer s.Close()
		setupG(t, s, 1)
		head := takeHeadOfG(t, s, lease)
		time.Sleep(2 * lease)
		snoozer := newStall(t, s, "finish.group_rows")
		snoozed := async(func() error { return snoozer.store.Snooze(ctx, head.ID, head.Token, time.Hour) })
		snoozer.waitBlocked() // it holds the head's row, not yet G's
		n, err := s.RescueExpired(ctx, 100)
		if err != nil || n != 0 {
			t.Fatalf("a rescue while the snooze holds the row: %d, %v; want it passed over", n, err)
		}
		snoozer.open()
		within(t, "the snooze", 2*time.Second, snoozed)
		if n, err := s.RescueExpired(ctx, 100); err != nil || n != 0 {
			t.Errorf("a rescue after the snooze committed ended %d claims (%v), want none", n, err)
		}
		j, err := s.Get(ctx, head.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != readpast.StatePending || len(j.Errors) != 0 || j.RunAt.Before(time.Now().Add(30*time.Minute)) {
			t.Errorf("after the snooze won: state %s, %d attempt errors, run at %s; want pending an hour from now, no error",
				j.State, len(j.Errors), j.RunAt)
		}
		checkGroups(t, s)
	})
}
