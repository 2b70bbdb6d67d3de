package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestSchedulePutWaitingOnAFire: a scheduler (whose clock runs ahead of
// the caller's) fires tick T1 of schedule y and stops with its row locked
// (schedule.fired); a put that changes the expression, computed from the
// caller's clock before T1, reaches the database meanwhile and waits for
// the row. Once the fire commits, the put must not set the next tick back
// to T1, which fired: it is refused on the row as locked and computed
// again after T1. Before, the put set the next tick to T1, and every fire
// after it failed with a duplicate key on readpast_schedule_runs_pkey.
func TestSchedulePutWaitingOnAFire(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	sc, _, err := s.PutSchedule(ctx, readpast.ScheduleParams{Name: "y", Cron: "0 0 1 1 *", Job: readpast.EnqueueParams{Kind: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	t1 := *sc.NextRunAt
	t2 := t1.AddDate(1, 0, 0)
	st := newStall(t, s, "schedule.fired")
	fired := async(func() error {
		_, _, err := st.store.FireSchedule(ctx, readpast.Firing{Name: "y", Version: sc.Version, Expect: t1, Tick: &t1, Next: &t2})
		return err
	})
	st.waitBlocked()
	var put *readpast.Schedule
	putDone := async(func() error {
		var err error
		put, _, err = s.PutSchedule(ctx, readpast.ScheduleParams{Name: "y", Cron: "@yearly", Job: readpast.EnqueueParams{Kind: "tick"}})
		return err
	})
	waitLockWait(t, s)
	st.open()
	within(t, "the fire", 5*time.Second, fired)
	within(t, "the put", 5*time.Second, putDone)
	if put.NextRunAt == nil || !put.NextRunAt.After(t1) {
		t.Fatalf("the put returned next tick %v, not after T1 %v, which fired", put.NextRunAt, t1)
	}
	got, err := s.GetSchedule(ctx, "y")
	if err != nil {
		t.Fatal(err)
	}
	if got.NextRunAt == nil || !got.NextRunAt.Equal(t2) || got.LastRunAt == nil || !got.LastRunAt.Equal(t1) {
		t.Fatalf("next %v, last %v; want T2 %v, T1 %v", got.NextRunAt, got.LastRunAt, t2, t1)
	}
	// A scheduler at T2 fires T2: no duplicate key.
	sch := readpast.NewScheduler(s, readpast.SchedulerConfig{Now: func() time.Time { return t2.Add(time.Second) }})
	if n, err := sch.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("a scheduler at T2: %d jobs, error %v; want 1", n, err)
	}
}
