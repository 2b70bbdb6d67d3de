package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// enqueueKey enqueues one job with key on s.
func enqueueKey(t *testing.T, s *postgres.Store, key string) *readpast.Job {
	t.Helper()
	jobs, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k", UniqueKey: key}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// stalledEnqueue starts an enqueue of key on st's store and waits until it
// is stopped at "enqueue.keys": its snapshot taken, the key not yet
// inserted. *got gets the job it returns.
func stalledEnqueue(t *testing.T, st *stall, key string, got **readpast.Job) <-chan error {
	t.Helper()
	ch := async(func() error {
		jobs, err := st.store.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k", UniqueKey: key}})
		if err == nil {
			*got = jobs[0]
		}
		return err
	})
	st.waitBlocked()
	return ch
}

func countLiveKey(t *testing.T, s *postgres.Store, key string) (live, all int) {
	t.Helper()
	err := s.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM readpast_jobs WHERE unique_key = $1),
		(SELECT count(*) FROM readpast_jobs WHERE unique_key = $1) + (SELECT count(*) FROM readpast_jobs_history WHERE unique_key = $1)`,
		key).Scan(&live, &all)
	if err != nil {
		t.Fatal(err)
	}
	return live, all
}

// TestUniqueKeyUnderInterleavings replays the windows of an enqueue with a
// unique key: between its snapshot and its insert of the key, another
// enqueue of the key commits, or the holder finishes and frees it. The
// unique index decides, not the snapshot: one job for the key in the
// first case (before, with a check-then-insert, two), and a new job in
// the second, not a "duplicate" of a job that no longer holds the key.
func TestUniqueKeyUnderInterleavings(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()

	t.Run("another enqueue of the key commits first", func(t *testing.T) {
		st := newStall(t, s, "enqueue.keys")
		var a *readpast.Job
		done := stalledEnqueue(t, st, "K1", &a)
		b := enqueueKey(t, s, "K1") // commits while A is stopped
		if b.Duplicate {
			t.Fatalf("the first committed enqueue is a duplicate: %+v", b)
		}
		st.open()
		within(t, "the stalled enqueue", 5*time.Second, done)
		if !a.Duplicate || a.ID != b.ID {
			t.Fatalf("stalled enqueue: job %d duplicate %v, want a duplicate of job %d", a.ID, a.Duplicate, b.ID)
		}
		if live, all := countLiveKey(t, s, "K1"); live != 1 || all != 1 {
			t.Fatalf("key K1: %d live jobs, %d in all; want 1", live, all)
		}
	})

	t.Run("the holder finishes first", func(t *testing.T) {
		drainAll(t, s)
		holder := enqueueKey(t, s, "K2")
		c := mustClaim(t, s, "w", 10)
		if len(c) != 1 || c[0].ID != holder.ID {
			t.Fatalf("claimed %v", c)
		}
		st := newStall(t, s, "enqueue.keys")
		var a *readpast.Job
		done := stalledEnqueue(t, st, "K2", &a) // its snapshot sees K2 held
		if err := first(s.Complete(ctx, []readpast.Completion{{ID: holder.ID, Token: c[0].Token}})); err != nil {
			t.Fatal(err)
		}
		st.open()
		within(t, "the stalled enqueue", 5*time.Second, done)
		if a.Duplicate || a.ID == holder.ID || a.State != readpast.StatePending {
			t.Fatalf("stalled enqueue: %+v; want a new job, the key having been freed", a)
		}
		if live, all := countLiveKey(t, s, "K2"); live != 1 || all != 2 {
			t.Fatalf("key K2: %d live jobs, %d in all; want 1 and 2", live, all)
		}
	})
}

// TestUniqueKeyWaits pins the wait table of docs/architecture.md: while a
// caller's transaction holds a key it inserted (EnqueueTx, not yet
// committed), claims, finishers, enqueues without a key or of other keys,
// and retries never wait on it; an enqueue of the same key waits for that
// transaction (uniqueness: it cannot know the answer before), then is a
// duplicate if it committed, or creates the job if it rolled back.
func TestUniqueKeyWaits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	for _, commit := range []bool{true, false} {
		groupJobs(t, s, "G", 1)
		enqueueKey(t, s, "done-"+time.Now().String())
		c := mustClaim(t, s, "w", 10)
		other := enqueueKey(t, s, "other")
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		held, err := s.EnqueueTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", UniqueKey: "HELD", Group: "G"}})
		if err != nil {
			t.Fatal(err)
		}
		claimWithin(t, "a claim", time.Second, s, claimP("w2", 10))
		within(t, "an enqueue without a key", time.Second, async(func() error {
			_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k", UniqueKey: "free-" + time.Now().String()}})
			return err
		}))
		within(t, "a duplicate of another key", time.Second, async(func() error {
			_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", UniqueKey: "other"}})
			return err
		}))
		for _, j := range c {
			within(t, "a completion", time.Second, async(func() error {
				return first(s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}))
			}))
		}
		within(t, "a cancel of the other key's holder", time.Second, async(func() error {
			_, err := s.Cancel(ctx, other.ID)
			return err
		}))
		var same *readpast.Job
		waiting := async(func() error {
			jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", UniqueKey: "HELD"}})
			if err == nil {
				same = jobs[0]
			}
			return err
		})
		select {
		case err := <-waiting:
			t.Fatalf("an enqueue of a key an open transaction inserted returned (%v) before that transaction ended", err)
		case <-time.After(300 * time.Millisecond):
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		within(t, "the enqueue of the same key, once the transaction ended", 5*time.Second, waiting)
		if commit && (!same.Duplicate || same.ID != held[0].ID) {
			t.Fatalf("after commit: %+v, want a duplicate of job %d", same, held[0].ID)
		}
		if !commit && same.Duplicate {
			t.Fatalf("after rollback: %+v, want a new job", same)
		}
		drainAll(t, s)
	}
}

// drainAll cancels every live job.
func drainAll(t *testing.T, s *postgres.Store) {
	t.Helper()
	for _, st := range []readpast.JobState{readpast.StatePending, readpast.StateRunning} {
		res, err := s.List(context.Background(), readpast.ListParams{State: st, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range res.Jobs {
			if _, err := s.Cancel(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSchedulersRaceOneTick: a scheduler stopped between its snapshot and
// its update of the schedule's row while another fires the same tick and
// commits. PostgreSQL re-checks the update's WHERE on the row as the other
// committed it: the next tick has moved, so the stopped scheduler fires
// nothing. One job for the tick.
func TestSchedulersRaceOneTick(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	sc, _, err := s.PutSchedule(ctx, readpast.ScheduleParams{Name: "race", Cron: "@every 1h", Job: readpast.EnqueueParams{Kind: "tick"}})
	if err != nil {
		t.Fatal(err)
	}
	tick := sc.NextRunAt.UTC()
	c, err := readpast.ParseCron(sc.Cron, sc.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	// What a scheduler does at the tick, on time: the tick's job, and the
	// next tick an interval on.
	next := c.Next(tick)
	plan := readpast.Firing{Name: sc.Name, Version: sc.Version, Expect: tick, Tick: &tick, Next: &next}
	st := newStall(t, s, "schedule.fire")
	var stalledFired bool
	var stalledJob *readpast.Job
	done := async(func() error {
		var err error
		stalledFired, stalledJob, err = st.store.FireSchedule(ctx, plan)
		return err
	})
	st.waitBlocked()
	fired, job, err := s.FireSchedule(ctx, plan)
	if err != nil || !fired || job == nil {
		t.Fatalf("the unstopped scheduler: %v %+v %v", fired, job, err)
	}
	st.open()
	within(t, "the stopped scheduler", 5*time.Second, done)
	if stalledFired || stalledJob != nil {
		t.Fatalf("the stopped scheduler fired the tick too: job %+v", stalledJob)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM readpast_jobs WHERE kind = 'tick'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d jobs for one tick (%v)", n, err)
	}
}
