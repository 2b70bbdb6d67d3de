package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestDeleteScheduleRacingAFire: a fire of schedule d has locked its row
// and stops before it records its run (schedule.fired); DeleteSchedule is
// called meanwhile and waits for the row. Once the fire commits, the
// delete must remove the fire's run too: a schedule created later under
// the same name lists no runs. Before, the delete read the runs in its
// statement's snapshot, taken before the fire committed, and left that
// run behind.
func TestDeleteScheduleRacingAFire(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	params := readpast.ScheduleParams{Name: "d", Cron: "0 0 1 1 *", Job: readpast.EnqueueParams{Kind: "tick"}}
	sc, _, err := s.PutSchedule(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	tick := *sc.NextRunAt
	next := tick.AddDate(1, 0, 0)
	st := newStall(t, s, "schedule.fired")
	fired := async(func() error {
		_, _, err := st.store.FireSchedule(ctx, readpast.Firing{Name: "d", Version: sc.Version, Expect: tick, Tick: &tick, Next: &next})
		return err
	})
	st.waitBlocked()
	deleted := async(func() error { return s.DeleteSchedule(ctx, "d") })
	waitLockWait(t, s)
	st.open()
	within(t, "the fire", 5*time.Second, fired)
	within(t, "the delete", 5*time.Second, deleted)
	if _, _, err := s.PutSchedule(ctx, params); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ScheduleRuns(ctx, "d", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Fatalf("a schedule created after the delete lists %d runs of the deleted one: %+v", len(runs), runs)
	}
}

// waitLockWait returns once a server session of s's database waits for a
// lock held by another transaction (a row lock: wait_event_type Lock,
// transactionid), or fails the test after 10 s.
func waitLockWait(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event IN ('transactionid', 'tuple')`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waits for a row lock")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
