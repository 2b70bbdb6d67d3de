package readpast_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestRateLimitedKindKeepsItsRate: workers that poll only every 30 s run
// a rate-limited key's backlog at its rate, woken when each start comes
// due (a claim that leaves a key out of tokens announces its next start),
// and never faster.
func TestRateLimitedKindKeepsItsRate(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		ctx := context.Background()
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "api", Rate: 10, Burst: 2}); err != nil {
			t.Fatal(err)
		}
		var (
			mu     sync.Mutex
			starts []time.Time
		)
		w := readpast.NewWorkers()
		w.Handle("call", func(ctx context.Context, job *readpast.Job) (any, error) {
			mu.Lock()
			starts = append(starts, *job.StartedAt)
			mu.Unlock()
			return nil, nil
		}, nil)
		const n = 12
		ps := make([]readpast.EnqueueParams, n)
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "call", Group: "api"}
		}
		if _, err := s.Enqueue(ctx, ps); err != nil {
			t.Fatal(err)
		}
		startClient(t, s, readpast.Config{Workers: w, PollInterval: 30 * time.Second})
		// 2 at once, then one every 100 ms: about 1 s for 12; the poll
		// alone would take minutes.
		waitFor(t, 15*time.Second, "the backlog to run at its rate", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(starts) == n
		})
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(starts, time.Time.Compare)
		for i := range starts {
			for j := i; j < len(starts); j++ {
				// At most Window/Interval + Burst starts in any window.
				if d := starts[j].Sub(starts[i]); d >= 0 && j-i+1 > int(d/(100*time.Millisecond))+2 {
					t.Fatalf("%d starts within %s (rate 10/s, burst 2): %v", j-i+1, d, starts)
				}
			}
		}
	})
}

// TestKeyMarkedManyTimesHidesNoOtherKey: a key whose ready marks come
// first in claim order several times over (each enqueue behind its
// backlog marks it again) hides no other key's due job from workers that
// poll once an hour. Key m:a (one at a time) has three jobs, each
// enqueued on its own, then m:b one, all while the queue is paused; on
// resume, a client of two workers takes m:a's first job, which runs
// until the test ends, and must start m:b's job too. A claim of two that
// read only m:a's first two marks came back with one job and named no
// other key: the client slept for its hour.
func TestKeyMarkedManyTimesHidesNoOtherKey(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		ctx := context.Background()
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "m:*", Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.PauseQueue(ctx, "m"); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"m:a", "m:a", "m:a", "m:b"} {
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "m", Group: key}}); err != nil {
				t.Fatal(err)
			}
		}
		release := make(chan struct{})
		started := make(chan string, 4)
		w := readpast.NewWorkers()
		w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
			started <- *job.Group
			if *job.Group == "m:a" {
				<-release
			}
			return nil, nil
		}, nil)
		c, err := readpast.NewClient(s, readpast.Config{
			Workers:      w,
			Queues:       map[string]readpast.QueueConfig{"m": {MaxWorkers: 2}},
			PollInterval: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			close(release) // m:a's job ends before Stop waits for it
			c.Stop(context.Background())
		}()
		time.Sleep(300 * time.Millisecond) // the wake-ups of the client's start are over
		if err := s.ResumeQueue(ctx, "m"); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		deadline := time.After(10 * time.Second)
		for got["m:a"] != 1 || got["m:b"] != 1 {
			select {
			case k := <-started:
				got[k]++
			case <-deadline:
				t.Fatalf("started %v in 10 s, want m:a's first job and m:b's (poll interval an hour)", got)
			}
		}
		select {
		case k := <-started:
			t.Fatalf("started a job of %s beside m:a's running one and m:b's, want none (m:a runs one at a time)", k)
		case <-time.After(200 * time.Millisecond):
		}
	})
}
