package readpast_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestHandlerSnooze: a handler that returns Snooze (wrapped or not) puts
// its job back to pending for later without counting the attempt, as many
// times as Config.MaxSnoozes allows; the next snooze fails the attempt
// with an error that says so.
func TestHandlerSnooze(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		var runs atomic.Int32
		w := readpast.NewWorkers()
		w.Handle("sleepy", func(ctx context.Context, job *readpast.Job) (any, error) {
			runs.Add(1)
			return nil, fmt.Errorf("not yet: %w", readpast.Snooze(10*time.Millisecond))
		}, nil)
		w.Handle("later", func(ctx context.Context, job *readpast.Job) (any, error) {
			if job.Snoozes == 0 {
				return nil, readpast.Snooze(time.Hour)
			}
			return "done", nil
		}, nil)
		c := startClient(t, s, readpast.Config{Workers: w, MaxSnoozes: 3, PollInterval: 10 * time.Millisecond})
		ctx := context.Background()
		jobs, err := c.Enqueue(ctx, readpast.EnqueueParams{Kind: "sleepy", MaxAttempts: 1},
			readpast.EnqueueParams{Kind: "later", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		sleepy, later := jobs[0].ID, jobs[1].ID
		waitFor(t, 20*time.Second, "the sleepy job to fail", func() bool { return stateOf(t, s, sleepy).State.Final() })
		j := stateOf(t, s, sleepy)
		if j.State != readpast.StateFailed || j.Snoozes != 3 || runs.Load() != 4 || len(j.Errors) != 1 ||
			!strings.Contains(j.Errors[0].Message, "snoozed 3 times, the limit (Config.MaxSnoozes)") {
			t.Fatalf("sleepy job: %s after %d runs, snoozes %d, errors %+v", j.State, runs.Load(), j.Snoozes, j.Errors)
		}
		waitFor(t, 10*time.Second, "the later job to snooze", func() bool { return stateOf(t, s, later).Snoozes == 1 })
		l := stateOf(t, s, later)
		if l.State != readpast.StatePending || l.Attempt != 0 || time.Until(l.RunAt) < 50*time.Minute {
			t.Fatalf("snoozed job: %s, attempt %d, run_at in %s", l.State, l.Attempt, time.Until(l.RunAt))
		}
		if _, err := s.Retry(ctx, later); err != nil { // run it now: it sees Snoozes 1 and succeeds
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the later job to succeed", func() bool { return stateOf(t, s, later).State == readpast.StateSucceeded })
	})
}

func TestSnoozeError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", readpast.Snooze(time.Minute))
	var se *readpast.SnoozeError
	if !errors.As(err, &se) || se.Delay != time.Minute {
		t.Fatalf("errors.As: %v", err)
	}
	eachStore(t, func(t *testing.T, s readpast.Store) {
		_, err := readpast.NewClient(s, readpast.Config{MaxSnoozes: -1})
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || fe.Field != "MaxSnoozes" {
			t.Fatalf("negative MaxSnoozes: %v", err)
		}
	})
}
