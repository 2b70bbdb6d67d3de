package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestListenStartAlarmsForTimesReadLate: a store that starts listening
// reads the due times it could not hear (due_upcoming.sql) and sets an
// alarm for each. A key out of tokens has its next start only in a ready
// mark, and nothing but that alarm wakes a claimer for it. The read's
// answer can arrive when the time is only a few milliseconds ahead, or
// already past (a slow LISTEN start on a loaded machine, the stall here):
// an alarm skipped for a time "soon" (the dueSoon rule for times the
// store writes itself, whose own wake-up finds them) leaves the key's job
// to the poll, 30 s here.
func TestListenStartAlarmsForTimesReadLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Duration // when the read's answer is let go, from the next start
	}{
		{"10ms before", -10 * time.Millisecond},
		{"200ms after", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() }) // after the client stops
			replayDueReadLate(t, s, tc.at)
		})
	}
}

// TestListenStartAlarmsWithTheDatabaseClockBehind: the same read, let go
// 10 ms before the key's next start by this host's clock, from a
// database whose clock runs 50 ms behind it (libfaketime): an alarm at the
// time alone wakes the claimers 40 ms before the database counts the
// start as due; the alarm dueSkew later finds it.
func TestListenStartAlarmsWithTheDatabaseClockBehind(t *testing.T) {
	srv := pgtest.ServerFor(t, pgtest.Options{Env: pgtest.FakeTimeEnv(t, "-0.05")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := pgharness.Open(t, u)
	t.Cleanup(func() { s.Close() })
	var dbNow time.Time
	if err := s.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if off := time.Until(dbNow); off > -30*time.Millisecond || off < -150*time.Millisecond {
		t.Fatalf("the database's clock is %v off this host's, want about -50ms", off)
	}
	replayDueReadLate(t, s, -10*time.Millisecond)
}

// replayDueReadLate makes a key's next start known only to s's database
// (another process claimed its first job while nobody listened), starts
// workers that poll every 30 s on a store whose listener's read of the
// missed due times stops at listen.due_upcoming, lets the read go at the
// next start + at by this host's clock, and checks that the key's second
// job starts within 3 s.
func replayDueReadLate(t *testing.T, s *postgres.Store, at time.Duration) {
	t.Helper()
	ctx := context.Background()
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Second, Burst: 1})
	advEnqueueKey(t, s, "api", 2)
	got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "other", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claimed %v, %v; want api's first job", got, err)
	}
	var next time.Time
	if err := s.Pool().QueryRow(ctx,
		"SELECT run_at FROM readpast_group_ready WHERE group_key = 'api'").Scan(&next); err != nil {
		t.Fatalf("api's next start: %v", err)
	}
	st := newStall(t, s, "listen.due_upcoming")
	c := startAdvClient(t, st.store, 30*time.Second)
	st.waitBlocked()
	time.Sleep(time.Until(next.Add(at)))
	st.open()
	if n := c.waitStarts("api", 1, 3*time.Second); n != 1 {
		t.Errorf("api's next start was read %v from it, as the store began to listen: workers polling every 30 s started %d of its jobs in 3 s",
			at, n)
	}
}

// TestListenStartReadsTimesPastABusyOne: the read of missed due times
// takes the earliest 256 distinct times; 300 jobs due at one time take
// one place, not 300, so a job due a second later is read too.
func TestListenStartReadsTimesPastABusyOne(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the client stops
	t1 := time.Now().Add(1500 * time.Millisecond)
	ps := make([]readpast.EnqueueParams, 300)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: "busy:" + strconv.Itoa(i), RunAt: t1}
	}
	ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: "later", RunAt: t1.Add(time.Second)})
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	// The enqueue's announcement goes out while no other store listens.
	time.Sleep(100 * time.Millisecond)
	b, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	started := make(chan time.Time, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
		if *j.Group == "later" {
			started <- *j.StartedAt
		}
		return nil, nil
	}, nil)
	cl, err := readpast.NewClient(b, readpast.Config{
		Workers:          w,
		PollInterval:     30 * time.Second,
		Queues:           map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 50, FetchLimit: 50}},
		RescueInterval:   -1,
		ScheduleInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cl.Stop(ctx)
	})
	select {
	case <-started:
	case <-time.After(time.Until(t1) + 4*time.Second):
		t.Errorf("a job due 1 s after 300 jobs due at one time, enqueued while nobody listened, did not start within 3 s of its time with workers polling every 30 s")
	}
}
