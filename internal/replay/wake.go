package replay

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Delivered claims queue through s at every wake-up on ch, as a worker
// that never polls would, until a claim gets job id, at most until
// claimable plus 3 s. It fails when no wake-up delivered the job, saying
// whether a plain claim then gets it (that is: it waits for the poll).
// what names the case in the messages.
func Delivered(t *testing.T, s readpast.Store, ch <-chan struct{}, queue string, id int64, claimable time.Time, what string) {
	t.Helper()
	ctx := context.Background()
	claim := func(worker string) []*readpast.Job {
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Worker: worker, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	has := func(js []*readpast.Job) bool {
		for _, j := range js {
			if j.ID == id {
				return true
			}
		}
		return false
	}
	deadline := time.After(time.Until(claimable) + 3*time.Second)
	wakes, early := 0, 0
	for waiting := true; waiting; {
		select {
		case <-ch:
			wakes++
			now := time.Now()
			if now.Before(claimable) {
				early++
			}
			if has(claim("w")) {
				t.Logf("%s: delivered %v after it became claimable (%d wake-ups, %d before)", what, now.Sub(claimable).Round(time.Millisecond), wakes, early)
				return
			}
		case <-deadline:
			waiting = false
		}
	}
	t.Fatalf("%s: job %d claimable from %v ago, %d wake-ups (%d before it was claimable) and none delivered it; a plain claim now gets it: %v. It waits for the poll.",
		what, id, time.Since(claimable).Round(time.Millisecond), wakes, early, has(claim("check")))
}

// NextStart is when key, governed by limitKey, next allows a start; it
// fails when the key has tokens now (the replay's window is not open) or
// no state.
func NextStart(t *testing.T, s readpast.Store, limitKey, key string) time.Time {
	t.Helper()
	li, err := s.GetLimit(context.Background(), limitKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range li.Keys {
		if k.Key == key {
			if k.NextStart.IsZero() {
				t.Fatalf("key %s has tokens (%d): no window", key, k.Tokens)
			}
			return k.NextStart
		}
	}
	t.Fatalf("no state for key %s", key)
	return time.Time{}
}

// Drain empties ch.
func Drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
