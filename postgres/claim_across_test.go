package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestJobAheadOfAPositionStartsPromptly: a client drains a trickle of jobs
// that its own process enqueues, with a poll interval of a minute, and
// another process (a second store on the same database) enqueues a job one
// priority ahead, 20 times. Each must start within 500 ms: the claim its
// wake-up starts is a full one, or, when it starts from a position and
// comes back short, the store wakes its claimers again when the next full
// claim is due (postgres/claimfrom.go). Before, that claim came back short
// and the job waited for the next full claim that a wake-up or a poll
// happened to start: up to a second with this trickle, the poll interval
// without it.
func TestJobAheadOfAPositionStartsPromptly(t *testing.T) {
	url := pgtest.URL(t)
	a := pgharness.Open(t, url) // the worker's process
	defer a.Close()
	b := pgharness.Open(t, url) // another process
	defer b.Close()
	waitsBehindTrickle(t, a, "another process's enqueue", func(ctx context.Context) (int64, time.Time) {
		js, err := b.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "urgent", Queue: "q", Priority: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return js[0].ID, time.Now()
	})
}

// TestJobDueBehindAPositionStartsPromptly: the same trickle, and this
// process enqueues a job one priority ahead that becomes due 100 ms later,
// 20 times. When it becomes due, the claims start from a position past it
// (the enqueue made one claim a full one, which did not take it): each
// must still start within 500 ms of its run_at. Before, it waited for the
// next full claim, up to a second.
func TestJobDueBehindAPositionStartsPromptly(t *testing.T) {
	a := pgharness.Open(t, pgtest.URL(t))
	defer a.Close()
	waitsBehindTrickle(t, a, "its run_at", func(ctx context.Context) (int64, time.Time) {
		at := time.Now().Add(100 * time.Millisecond)
		js, err := a.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "urgent", Queue: "q", Priority: 1, RunAt: at}})
		if err != nil {
			t.Fatal(err)
		}
		return js[0].ID, at
	})
}

// waitsBehindTrickle runs a client on a that drains a trickle of queue q
// (priority 2, enqueued by a every 10 ms) with a poll interval of a
// minute, calls urgent 20 times (it enqueues a job of kind "urgent" and
// returns its id and the time from which its wait counts), and fails
// unless nine in ten such jobs start within 500 ms of that time and half
// within 100 ms. Every wait is 500 ms at most while a claim from the head
// takes under 25 ms; on a loaded machine (CI, under -race, beside other
// test binaries) claims are slower, full claims further apart, and one
// wait in twenty went to 1.26 s, so the test bounds the 90th percentile
// and logs the rest. Without adaptive positions and the short-claim
// wake-up, half the waits are over 900 ms.
func waitsBehindTrickle(t *testing.T, a *postgres.Store, from string, urgent func(context.Context) (int64, time.Time)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	started := map[int64]chan time.Time{}
	startedCh := func(id int64) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		ch := started[id]
		if ch == nil {
			ch = make(chan time.Time, 1)
			started[id] = ch
		}
		return ch
	}
	workers := readpast.NewWorkers()
	workers.Handle("urgent", func(ctx context.Context, j *readpast.Job) (any, error) {
		startedCh(j.ID) <- time.Now()
		return nil, nil
	}, nil)
	workers.Handle("trickle", func(ctx context.Context, j *readpast.Job) (any, error) { return nil, nil }, nil)
	c, err := readpast.NewClient(a, readpast.Config{
		Workers:      workers,
		Queues:       map[string]readpast.QueueConfig{"q": {MaxWorkers: 4}},
		Lease:        time.Minute,
		PollInterval: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())

	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := a.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "trickle", Queue: "q", Priority: 2}}); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { cancel(); <-trickled }()
	time.Sleep(300 * time.Millisecond) // the trickle's claims are under way

	var waits []time.Duration
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		id, since := urgent(ctx)
		select {
		case at := <-startedCh(id):
			waits = append(waits, at.Sub(since))
		case <-time.After(3 * time.Second):
			t.Fatalf("job %d, ahead of the trickle, did not start within 3 s of %s (poll interval a minute); waits so far %v", id, from, waits)
		}
	}
	t.Logf("waits in order: %v", waits)
	slices.Sort(waits)
	p50, p99 := waits[len(waits)/2], waits[len(waits)-1]
	p90 := waits[len(waits)*9/10-1]
	t.Logf("from %s to the job's start: p50 %v, p90 %v, p99 %v (%d jobs)", from, p50, p90, p99, len(waits))
	// Without the fix the p50 was over 900 ms; idle it is under 25 ms.
	// 300 ms leaves room for a machine busy with another package's tests.
	if p50 > 300*time.Millisecond || p90 > 500*time.Millisecond {
		t.Fatalf("jobs ahead of the trickle started p50 %v, p90 %v after %s; want within 300 ms and 500 ms", p50, p90, from)
	}
}

// TestJobComingDueOnAnIdleQueueStartsPromptly: a client serves queue q
// with free workers and a poll interval of a minute, and nothing else
// runs. A job is enqueued to become due 300 ms later, by this process, by
// another process (a second store on the same database), or made so by a
// failed attempt retried 300 ms later. It must start within 500 ms of
// becoming due: the store sets an alarm for each run_at it writes, and
// other processes learn the times of enqueues from a NOTIFY (due.go).
// Before, nothing woke the claimer when the job became due, and it waited
// for the poll.
func TestJobComingDueOnAnIdleQueueStartsPromptly(t *testing.T) {
	for _, c := range []string{"this process", "another process", "retry of a failed attempt"} {
		t.Run(c, func(t *testing.T) {
			url := pgtest.URL(t)
			a := pgharness.Open(t, url)
			b := pgharness.Open(t, url)                // another process on the same database
			t.Cleanup(func() { a.Close(); b.Close() }) // after DueClient's stop
			started, failed := storetest.DueClient(t, a, c == "retry of a failed attempt")
			by := a
			if c == "another process" {
				by = b
			}
			var fails <-chan time.Time
			if c == "retry of a failed attempt" {
				fails = failed
			}
			due := storetest.EnqueueDue(t, by, fails)
			storetest.StartsWithin(t, started, due, 500*time.Millisecond, c)
		})
	}
}
