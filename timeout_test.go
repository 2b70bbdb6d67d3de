package readpast_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestHandlerTimeouts: per kind, per job and per client, a handler's ctx
// ends at its timeout with cause ErrHandlerTimeout, and the attempt fails
// with an error that says so (a lost lease, by contrast, records nothing);
// a job may lift its kind's timeout, and a handler that succeeds anyway
// succeeds.
func TestHandlerTimeouts(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		var mu sync.Mutex
		causes := map[int64]error{}
		wait := func(ctx context.Context, job *readpast.Job) (any, error) {
			var p struct{ SleepMS int }
			if err := json.Unmarshal(job.Payload, &p); err != nil {
				return nil, err
			}
			select {
			case <-time.After(time.Duration(p.SleepMS) * time.Millisecond):
				return "slept", nil
			case <-ctx.Done():
				mu.Lock()
				causes[job.ID] = context.Cause(ctx)
				mu.Unlock()
				return nil, ctx.Err()
			}
		}
		w := readpast.NewWorkers()
		w.Handle("kind", wait, &readpast.HandlerOptions{
			Timeout: 200 * time.Millisecond,
			JobTimeout: func(job *readpast.Job) time.Duration {
				var p struct{ TimeoutMS int }
				_ = json.Unmarshal(job.Payload, &p)
				return time.Duration(p.TimeoutMS) * time.Millisecond
			},
		})
		w.Handle("default", wait, nil)
		w.Handle("stubborn", func(ctx context.Context, job *readpast.Job) (any, error) {
			time.Sleep(400 * time.Millisecond) // ignores ctx, then succeeds
			return "done anyway", nil
		}, &readpast.HandlerOptions{Timeout: 100 * time.Millisecond})
		c := startClient(t, s, readpast.Config{Workers: w, JobTimeout: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		enq := func(kind, payload string) int64 {
			jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: kind, Payload: json.RawMessage(payload), MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			return jobs[0].ID
		}
		kindTimeout := enq("kind", `{"SleepMS":60000}`)
		jobTimeout := enq("kind", `{"SleepMS":60000,"TimeoutMS":100}`)
		noTimeout := enq("kind", `{"SleepMS":500,"TimeoutMS":-1}`)
		clientTimeout := enq("default", `{"SleepMS":60000}`)
		inTime := enq("default", `{"SleepMS":10}`)
		stubborn := enq("stubborn", `{}`)
		for _, id := range []int64{kindTimeout, jobTimeout, noTimeout, clientTimeout, inTime, stubborn} {
			waitFor(t, 20*time.Second, "every job to finish", func() bool { return stateOf(t, s, id).State.Final() })
		}
		for id, want := range map[int64]string{kindTimeout: "200ms", jobTimeout: "100ms", clientTimeout: "300ms"} {
			j := stateOf(t, s, id)
			wantMsg := "readpast: handler timed out after " + want + " (the handler returned: context deadline exceeded)"
			if j.State != readpast.StateFailed || len(j.Errors) != 1 || j.Errors[0].Message != wantMsg {
				t.Errorf("job %d: %s with errors %+v, want failed with %q", id, j.State, j.Errors, wantMsg)
			}
			mu.Lock()
			cause := causes[id]
			mu.Unlock()
			if !errors.Is(cause, readpast.ErrHandlerTimeout) {
				t.Errorf("job %d: handler's ctx ended with cause %v, want ErrHandlerTimeout", id, cause)
			}
		}
		for _, id := range []int64{noTimeout, inTime, stubborn} {
			if j := stateOf(t, s, id); j.State != readpast.StateSucceeded || len(j.Errors) != 0 {
				t.Errorf("job %d: %s with errors %+v, want succeeded", id, j.State, j.Errors)
			}
		}
	})
}

func TestTimeoutError(t *testing.T) {
	inner := readpast.Permanent(errors.New("bad input"))
	err := error(&readpast.TimeoutError{Timeout: time.Second, Err: inner})
	if !errors.Is(err, readpast.ErrHandlerTimeout) || !errors.Is(err, inner) || errors.Is(err, readpast.ErrLeaseLost) {
		t.Fatalf("TimeoutError matches wrongly: %v", err)
	}
	if !strings.Contains(err.Error(), "timed out after 1s") || !strings.Contains(err.Error(), "bad input") {
		t.Fatalf("message %q", err)
	}
	eachStore(t, func(t *testing.T, s readpast.Store) {
		_, err := readpast.NewClient(s, readpast.Config{JobTimeout: -time.Second})
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || fe.Field != "JobTimeout" {
			t.Fatalf("negative JobTimeout: %v", err)
		}
	})
}
