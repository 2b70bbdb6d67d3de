package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testCancelClaimed: CancelClaimed cancels a job running under the token
// it is given, as Cancel does (to history as cancelled, its key's slot
// freed), accepts a repeat with that token, and refuses any other token
// with ErrStaleToken, changing nothing: a pending job, a job running under
// another claim, a job that ended otherwise, a malformed token. An
// unknown id is ErrNotFound.
func testCancelClaimed(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)

	first := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cc", Group: "cc-g"})[0]
	next := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cc", Group: "cc-g"})[0]
	running := claim(t, s, 10, time.Minute, "cc")
	if len(running) != 1 || running[0].ID != first.ID {
		t.Fatalf("claim took %v, want [%d] (one job of the key at a time)", ids(running), first.ID)
	}
	r := running[0]

	// Refused, changing nothing: a pending job, a malformed token, a token
	// of no claim.
	for _, tc := range []struct {
		name  string
		id    int64
		token string
	}{
		{"a pending job", next.ID, r.Token},
		{"a malformed token", r.ID, "not-a-token"},
		{"an empty token", r.ID, ""},
		{"an empty token, pending", next.ID, ""},
		{"a token of no claim", r.ID, "0b0c7d1e-0000-4000-8000-000000000000"},
	} {
		before := get(t, s, tc.id)
		if j, err := s.CancelClaimed(ctx, tc.id, tc.token); !errors.Is(err, readpast.ErrStaleToken) || j != nil {
			t.Fatalf("CancelClaimed of %s: %+v, %v; want ErrStaleToken", tc.name, j, err)
		}
		if after := get(t, s, tc.id); after.State != before.State || after.Token != before.Token || after.Attempt != before.Attempt {
			t.Fatalf("a refused CancelClaimed of %s changed the job: %+v, was %+v", tc.name, after, before)
		}
	}
	if j, err := s.CancelClaimed(ctx, 987654, r.Token); !errors.Is(err, readpast.ErrNotFound) || j != nil {
		t.Fatalf("CancelClaimed of an unknown id: %+v, %v; want ErrNotFound", j, err)
	}

	// The current claim cancels: history, and the key's next job claimable.
	j, err := s.CancelClaimed(ctx, r.ID, r.Token)
	if err != nil || j == nil || j.ID != r.ID || j.State != readpast.StateCancelled || j.FinishedAt == nil {
		t.Fatalf("CancelClaimed with the current token: %+v, %v; want the job cancelled", j, err)
	}
	wantState(t, s, r.ID, readpast.StateCancelled)
	if c := claim(t, s, 10, time.Minute, "cc"); len(c) != 1 || c[0].ID != next.ID {
		t.Fatalf("after its running job was cancelled the key's claim took %v, want [%d]", ids(c), next.ID)
	}
	// A repeat (the answer lost) is accepted and changes nothing.
	again, err := s.CancelClaimed(ctx, r.ID, r.Token)
	if err != nil || again == nil || again.State != readpast.StateCancelled || !equalTimes(again.FinishedAt, j.FinishedAt) {
		t.Fatalf("CancelClaimed again with the token that cancelled it: %+v, %v; want the job as it was", again, err)
	}
	// A job that ended otherwise stays stale to its token, and a job the
	// operator cancelled under another claim too.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cc-done"})
	done := claim(t, s, 10, time.Minute, "cc-done")[0]
	if err := completeOne(ctx, s, done, ""); err != nil {
		t.Fatal(err)
	}
	if j, err := s.CancelClaimed(ctx, done.ID, done.Token); !errors.Is(err, readpast.ErrStaleToken) || j != nil {
		t.Fatalf("CancelClaimed of a succeeded job with its token: %+v, %v; want ErrStaleToken", j, err)
	}
	if j, err := s.CancelClaimed(ctx, r.ID, done.Token); !errors.Is(err, readpast.ErrStaleToken) || j != nil {
		t.Fatalf("CancelClaimed of a cancelled job with another claim's token: %+v, %v; want ErrStaleToken", j, err)
	}
	// An operator's cancel of a running attempt is what its worker's
	// cancel asks for: the worker's then gets the job; after a retry the
	// token is stale again.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "cc-op"})
	op := claim(t, s, 10, time.Minute, "cc-op")[0]
	if _, err := s.Cancel(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := s.CancelClaimed(ctx, op.ID, op.Token); err != nil || j == nil || j.State != readpast.StateCancelled {
		t.Fatalf("CancelClaimed of a job an operator cancelled while it ran under the token: %+v, %v; want the job", j, err)
	}
	if _, err := s.Retry(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if j, err := s.CancelClaimed(ctx, op.ID, op.Token); !errors.Is(err, readpast.ErrStaleToken) || j != nil {
		t.Fatalf("CancelClaimed of a retried job with its earlier attempt's token: %+v, %v; want ErrStaleToken", j, err)
	}
	wantState(t, s, op.ID, readpast.StatePending)
}
