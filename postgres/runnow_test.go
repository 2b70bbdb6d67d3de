package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestRunNowRacingAClaim replays RunNow meeting a claim of the same job,
// with the claim stopped before its commit (claim.end), holding the job's
// row:
//
//   - The job is due by RunNow's clock: RunNow neither writes nor locks a
//     due job, so it returns at once, the job unchanged and pending, and
//     the claim commits as if RunNow had come first.
//   - The job is due by the claim's clock but not yet by RunNow's (RunNow
//     stopped after its snapshot, before the job's row: run_now.update):
//     RunNow's update waits for the claim's row lock, then matches
//     nothing on the job as the claim left it, and RunNow, looking again,
//     refuses the job, running, with ErrInvalidState. The job is claimed
//     once and keeps its run-at.
func TestRunNowRacingAClaim(t *testing.T) {
	ctx := context.Background()
	t.Run("due", func(t *testing.T) {
		s := newStore(t)
		job, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "rq", RunAt: time.Now().Add(-time.Second)}})
		if err != nil {
			t.Fatal(err)
		}
		cl := newStall(t, s, "claim.end")
		var claimed []*readpast.Job
		claimDone := async(func() (err error) {
			claimed, err = cl.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rq"}, Worker: "w", Limit: 1, Lease: time.Minute})
			return err
		})
		cl.waitBlocked()
		var j *readpast.Job
		within(t, "RunNow of a due job a claim holds", time.Second, async(func() (err error) {
			j, err = s.RunNow(ctx, job[0].ID)
			return err
		}))
		if j.State != readpast.StatePending || !j.RunAt.Equal(job[0].RunAt) {
			t.Fatalf("RunNow returned %s at %v; want the job unchanged, pending at %v", j.State, j.RunAt, job[0].RunAt)
		}
		cl.open()
		within(t, "the claim", 5*time.Second, claimDone)
		got := getJob(t, s, job[0].ID)
		if len(claimed) != 1 || got.State != readpast.StateRunning || got.Attempt != 1 || !got.RunAt.Equal(job[0].RunAt) {
			t.Fatalf("claimed %d jobs; job is %s, attempt %d, run-at %v; want it claimed once, at %v", len(claimed), got.State, got.Attempt, got.RunAt, job[0].RunAt)
		}
	})
	t.Run("due by the claim's clock", func(t *testing.T) {
		s := newStore(t)
		runAt := time.Now().Add(500 * time.Millisecond)
		job, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "rq", RunAt: runAt}})
		if err != nil {
			t.Fatal(err)
		}
		rn := newStall(t, s, "run_now.update")
		var rerr error
		runDone := async(func() error {
			_, rerr = rn.store.RunNow(ctx, job[0].ID)
			return nil
		})
		rn.waitBlocked() // its snapshot taken, its clock before the run-at
		time.Sleep(time.Until(runAt) + 50*time.Millisecond)
		cl := newStall(t, s, "claim.end")
		claimDone := async(func() error {
			c, err := cl.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rq"}, Worker: "w", Limit: 1, Lease: time.Minute})
			if err == nil && len(c) != 1 {
				err = errors.New("the claim took no job")
			}
			return err
		})
		cl.waitBlocked() // the claim holds the job's row
		rn.open()
		waitLockWait(t, s) // RunNow's update waits for the row
		cl.open()
		within(t, "the claim", 5*time.Second, claimDone)
		within(t, "RunNow", 5*time.Second, runDone)
		if !errors.Is(rerr, readpast.ErrInvalidState) || !strings.Contains(rerr.Error(), "running") {
			t.Fatalf("RunNow racing the claim: %v; want ErrInvalidState naming running", rerr)
		}
		got := getJob(t, s, job[0].ID)
		if got.State != readpast.StateRunning || got.Attempt != 1 || !got.RunAt.Equal(job[0].RunAt) {
			t.Fatalf("job is %s, attempt %d, run-at %v; want it running, claimed once, at %v", got.State, got.Attempt, got.RunAt, job[0].RunAt)
		}
	})
}

// TestRunNowAheadOfAPosition: a job RunNow makes due ahead of the claim
// position of a claimer of this store (a higher priority than the jobs
// it claimed last) is claimed at once. The claimer polls once a minute
// and full claims are an hour apart, so only RunNow's own wake-up can
// start its claim, and that claim must start at the head
// (claimFrom.ahead): a claim from the position, past the job, comes back
// empty. The stall holds ahead until a claim has begun (or half a second
// has passed): no claim may begin inside it.
func TestRunNowAheadOfAPosition(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("readpast_listen", "off") // only this store's own wake-ups
	u.RawQuery = q.Encode()
	s := pgharness.Open(t, u.String())
	defer s.Close()
	postgres.SetClaimFullEvery(s, time.Hour)
	var armed, wokeEarly atomic.Bool
	w := claimWatch{Store: s, began: make(chan struct{}, 1), inFlight: new(atomic.Int32)}
	postgres.OnAhead(s, func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		select {
		case <-w.began:
			wokeEarly.Store(true)
		case <-time.After(500 * time.Millisecond):
		}
	})
	t0 := time.Now().Add(-time.Hour)
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "q", Priority: -1, RunAt: time.Now().Add(time.Hour)},
		{Kind: "k", Queue: "q", RunAt: t0},
		{Kind: "k", Queue: "q", RunAt: t0.Add(time.Second)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int64, 10)
	workers := readpast.NewWorkers()
	workers.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
		ran <- j.ID
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(w, readpast.Config{
		Workers:        workers,
		Queues:         map[string]readpast.QueueConfig{"q": {MaxWorkers: 1}},
		Lease:          time.Minute,
		PollInterval:   time.Minute,
		RescueInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	for _, want := range []int64{jobs[1].ID, jobs[2].ID} {
		select {
		case id := <-ran:
			if id != want {
				t.Fatalf("ran job %d, want %d", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("job %d did not run", want)
		}
	}
	// Let the client come back empty and go to sleep: no claim in
	// flight, and none begun, for 200 ms.
	for quiet := false; !quiet; {
		select {
		case <-w.began:
		case <-time.After(200 * time.Millisecond):
			quiet = w.inFlight.Load() == 0
		}
	}

	armed.Store(true)
	if _, err := s.RunNow(ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != jobs[0].ID {
			t.Fatalf("ran job %d, want %d", id, jobs[0].ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("job %d, made due ahead of the position, did not run within 5 s (a claim began before the next one was forced full: %v)", jobs[0].ID, wokeEarly.Load())
	}
	if armed.Load() {
		t.Fatal("RunNow never made the next claim a full one")
	}
	if wokeEarly.Load() {
		t.Fatal("a claimer was woken before the next claim was made a full one")
	}
}
