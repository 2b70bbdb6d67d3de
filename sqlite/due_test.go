package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// TestJobComingDueStartsPromptly: a client with free workers and a poll
// interval of a minute; a job this process enqueues to become due 300 ms
// later, or a failed attempt retried 300 ms later, starts within 500 ms of
// becoming due (the store's alarm, due.go). Before, it waited for the poll.
func TestJobComingDueStartsPromptly(t *testing.T) {
	for _, c := range []string{"enqueued for later", "retry of a failed attempt"} {
		t.Run(c, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "due.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			started := make(chan time.Time, 4)
			failedAt := make(chan time.Time, 1)
			workers := readpast.NewWorkers()
			workers.Handle("due", func(ctx context.Context, j *readpast.Job) (any, error) {
				if c == "retry of a failed attempt" && j.Attempt == 1 {
					failedAt <- time.Now()
					return nil, errors.New("the first attempt fails")
				}
				started <- time.Now()
				return nil, nil
			}, nil)
			cl, err := readpast.NewClient(s, readpast.Config{
				Workers:      workers,
				Queues:       map[string]readpast.QueueConfig{"q": {MaxWorkers: 4}},
				Lease:        time.Minute,
				PollInterval: time.Minute,
				RetryPolicy:  func(int) time.Duration { return 300 * time.Millisecond },
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer cl.Stop(context.Background())
			time.Sleep(200 * time.Millisecond)
			due := time.Now().Add(300 * time.Millisecond)
			p := readpast.EnqueueParams{Kind: "due", Queue: "q", RunAt: due, MaxAttempts: 3}
			if c == "retry of a failed attempt" {
				p.RunAt = time.Time{}
			}
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{p}); err != nil {
				t.Fatal(err)
			}
			if c == "retry of a failed attempt" {
				select {
				case at := <-failedAt:
					due = at.Add(300 * time.Millisecond)
				case <-time.After(3 * time.Second):
					t.Fatal("the first attempt did not run")
				}
			}
			select {
			case at := <-started:
				if at.Sub(due) > 500*time.Millisecond {
					t.Fatalf("%s: the job started %v after it became due; want within 500 ms", c, at.Sub(due))
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("%s: a job due %v ago, with free workers, has not started (poll interval a minute)", c, time.Since(due).Round(time.Millisecond))
			}
		})
	}
}
