package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// DueClient starts a Client on s for the tests of jobs that become due
// later: it serves queue q with four workers, polls once a minute (so that
// only a wake-up starts a job sooner) and retries a failed attempt 300 ms
// later. A job of kind "due" sends the time it starts on started; with
// failFirst its first attempt fails instead, sending its time on failed.
// The client stops when the test ends.
func DueClient(t *testing.T, s readpast.Store, failFirst bool) (started, failed <-chan time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	start, fail := make(chan time.Time, 4), make(chan time.Time, 1)
	workers := readpast.NewWorkers()
	workers.Handle("due", func(ctx context.Context, j *readpast.Job) (any, error) {
		if failFirst && j.Attempt == 1 {
			fail <- time.Now()
			return nil, errors.New("the first attempt fails")
		}
		start <- time.Now()
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{
		Workers:      workers,
		Queues:       map[string]readpast.QueueConfig{"q": {MaxWorkers: 4}},
		Lease:        time.Minute,
		PollInterval: time.Minute,
		RetryPolicy:  func(int) time.Duration { return 300 * time.Millisecond },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Stop(context.Background())
	})
	time.Sleep(300 * time.Millisecond) // the client's first claims are over
	return start, fail
}

// StartsWithin fails the test unless a job of DueClient starts (on
// started) within d of due; what names the case.
func StartsWithin(t *testing.T, started <-chan time.Time, due time.Time, d time.Duration, what string) {
	t.Helper()
	select {
	case at := <-started:
		t.Logf("%s: started %v after it became due", what, at.Sub(due).Round(time.Millisecond))
		if at.Sub(due) > d {
			t.Fatalf("%s: the job started %v after it became due; want within %v", what, at.Sub(due), d)
		}
	case <-time.After(d + 2500*time.Millisecond):
		t.Fatalf("%s: a job due %v ago, with free workers, has not started (poll interval a minute)", what, time.Since(due).Round(time.Millisecond))
	}
}

// EnqueueDue enqueues on by a job of kind "due" into queue q that becomes
// due 300 ms from now; or, given DueClient's failed channel (failFirst), a
// job due now whose first attempt fails and is retried 300 ms later. It
// returns when the job becomes due.
func EnqueueDue(t *testing.T, by readpast.Store, failed <-chan time.Time) time.Time {
	t.Helper()
	due := time.Now().Add(300 * time.Millisecond)
	p := readpast.EnqueueParams{Kind: "due", Queue: "q", RunAt: due, MaxAttempts: 3}
	if failed != nil {
		p.RunAt = time.Time{}
	}
	if _, err := by.Enqueue(context.Background(), []readpast.EnqueueParams{p}); err != nil {
		t.Fatal(err)
	}
	if failed == nil {
		return due
	}
	select {
	case at := <-failed:
		return at.Add(300 * time.Millisecond)
	case <-time.After(3 * time.Second):
		t.Fatal("the first attempt did not run")
		return time.Time{}
	}
}
