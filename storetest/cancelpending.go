package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testCancelPending: CancelPending cancels a pending job as Cancel does
// (to history as cancelled, counted, its unique key released, its key's
// next job claimable), and refuses every other state, changing nothing: a
// running job stays running under its claim, whose worker can still
// complete it.
func testCancelPending(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	counts := func(queue string) string {
		t.Helper()
		out := map[readpast.JobState]int64{}
		for _, x := range ok(s.Stats(ctx)).must(t) {
			if x.Queue == queue && x.Count != 0 {
				out[x.State] += x.Count
			}
		}
		return fmt.Sprint(out)
	}

	// A pending job, its key's head with a unique key, and the key's next job.
	head := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cp", Group: "cp-g", UniqueKey: "cp-key"})[0]
	next := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cp", Group: "cp-g"})[0]
	j, err := s.CancelPending(ctx, head.ID)
	if err != nil || j == nil || j.ID != head.ID || j.State != readpast.StateCancelled || j.FinishedAt == nil || j.UniqueKey != "cp-key" {
		t.Fatalf("CancelPending of a pending job: %+v, %v; want it cancelled", j, err)
	}
	if got := get(t, s, head.ID); got.State != readpast.StateCancelled || !equalTimes(got.FinishedAt, j.FinishedAt) {
		t.Fatalf("after CancelPending the store has %+v; CancelPending returned %+v", got, j)
	}
	listed := ok(s.List(ctx, readpast.ListParams{Queue: "cp", State: readpast.StateCancelled})).must(t)
	if !slices.Equal(ids(listed.Jobs), []int64{head.ID}) {
		t.Fatalf("cancelled jobs listed: %v, want [%d]", ids(listed.Jobs), head.ID)
	}
	if got, want := counts("cp"), fmt.Sprint(map[readpast.JobState]int64{readpast.StatePending: 1, readpast.StateCancelled: 1}); got != want {
		t.Fatalf("counts after CancelPending: %s, want %s", got, want)
	}
	wantNew(t, "the cancelled job's unique key again", enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cp-u", UniqueKey: "cp-key"})[0], "cp-key")
	c := claim(t, s, 10, time.Minute, "cp")
	if len(c) != 1 || c[0].ID != next.ID {
		t.Fatalf("after its head was cancelled the key's claim took %v, want [%d]", ids(c), next.ID)
	}

	// A running job is refused and left running under its claim.
	running := c[0]
	j, err = s.CancelPending(ctx, running.ID)
	if !errors.Is(err, readpast.ErrInvalidState) || !strings.Contains(err.Error(), string(readpast.StateRunning)) || j != nil {
		t.Fatalf("CancelPending of a running job: %+v, %v; want ErrInvalidState naming running", j, err)
	}
	if got := get(t, s, running.ID); got.State != readpast.StateRunning || got.Token != running.Token || got.Attempt != running.Attempt {
		t.Fatalf("CancelPending of a running job changed it: %+v, was claimed as %+v", got, running)
	}
	if got, want := counts("cp"), fmt.Sprint(map[readpast.JobState]int64{readpast.StateRunning: 1, readpast.StateCancelled: 1}); got != want {
		t.Fatalf("counts after a refused CancelPending: %s, want %s", got, want)
	}
	if err := completeOne(ctx, s, running, ""); err != nil {
		t.Fatalf("the worker's completion after a refused CancelPending: %v", err)
	}

	// Finished jobs are refused and stay as they were.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cp-f"})
	f := claim(t, s, 1, time.Minute, "cp-f")[0]
	if err := failOne(ctx, s, readpast.Failure{ID: f.ID, Token: f.Token, Message: "boom", Discard: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    int64
		state readpast.JobState
	}{
		{running.ID, readpast.StateSucceeded},
		{f.ID, readpast.StateFailed},
		{head.ID, readpast.StateCancelled},
	} {
		was := get(t, s, tc.id)
		j, err := s.CancelPending(ctx, tc.id)
		if !errors.Is(err, readpast.ErrInvalidState) || !strings.Contains(err.Error(), string(tc.state)) || j != nil {
			t.Errorf("CancelPending of a %s job: %+v, %v; want ErrInvalidState naming %s", tc.state, j, err, tc.state)
		}
		if now := get(t, s, tc.id); now.State != was.State || !equalTimes(now.FinishedAt, was.FinishedAt) || len(now.Errors) != len(was.Errors) {
			t.Errorf("CancelPending of a %s job changed it: %+v, was %+v", tc.state, now, was)
		}
	}

	if j, err := s.CancelPending(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) || j != nil {
		t.Fatalf("CancelPending of an unknown id: %+v, %v; want ErrNotFound", j, err)
	}
}
