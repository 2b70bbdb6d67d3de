package readpast_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// slowAnswers is a store whose claims answer late: each returns its jobs
// delay after the database took them, as a loaded server or network does.
type slowAnswers struct {
	readpast.Store
	delay time.Duration
}

func (s slowAnswers) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	jobs, err := s.Store.Claim(ctx, p)
	if len(jobs) > 0 {
		time.Sleep(s.delay)
	}
	return jobs, err
}

// TestRetryNeverEarlyAfterASlowClaim: a failed job is retried no sooner
// than its policy says, however long its claim took to answer. Retry
// times are computed on the database's clock, estimated from the claim's
// time there; the estimate was measured from when the claim returned, so
// it ran behind by as long as the answer took, and a retry came that much
// early (TestClockSkew saw one at 0.9 s of a 1 s policy under CI's load).
// Here every claim answers 400 ms late: the retry used to be due 0.6 s
// after the failure.
func TestRetryNeverEarlyAfterASlowClaim(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	failedAt := make(chan time.Time, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		if job.Attempt == 1 {
			failedAt <- time.Now()
			return nil, errors.New("first attempt fails")
		}
		return nil, nil
	}, &readpast.HandlerOptions{RetryPolicy: func(int) time.Duration { return time.Second }})
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	startClient(t, slowAnswers{s, 400 * time.Millisecond}, readpast.Config{Workers: w, PollInterval: 20 * time.Millisecond})
	failed := <-failedAt
	var j *readpast.Job
	waitFor(t, 10*time.Second, "the failure to be written", func() bool {
		j, err = s.Get(ctx, jobs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.Attempt == 1 && j.State == readpast.StatePending
	})
	if due := j.RunAt.Sub(failed); due < time.Second {
		t.Errorf("the retry is due %v after the failure; the policy says 1s", due)
	}
}
