package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Adversarial probes of P1/P2/P3 that are expected to hold.

// TestAdvKeysRateSharedFirstAndLater: r (no concurrency bound, 2 starts
// per hour, burst 2) is the first key of three jobs and a later key of
// three more, all in one claim: over an hour it starts at most 2+2; the
// next start comes exactly at the next token and a claim then returns it.
func TestAdvKeysRateSharedFirstAndLater(t *testing.T) {
	s, c := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "r", Rate: 2, Per: time.Hour, Burst: 2})
	keysPut(t, s, readpast.Limit{Key: "g*", Concurrency: 10})
	keysEnqueue(t, s, kjob("r"), kjob("g1", "r"), kjob("r"), kjob("g2", "r"), kjob("r"), kjob("g3", "r"))
	total := len(keysClaim(t, s, 10, time.Hour))
	if total != 2 {
		t.Fatalf("first claim started %d, want 2 (burst)", total)
	}
	if n := len(keysClaim(t, s, 10, time.Hour)); n != 0 {
		t.Fatalf("second claim at once started %d", n)
	}
	c.add(29 * time.Minute)
	if n := len(keysClaim(t, s, 10, time.Hour)); n != 0 {
		t.Fatalf("claim before the next token started %d", n)
	}
	c.add(time.Minute + time.Millisecond)
	n := len(keysClaim(t, s, 10, time.Hour))
	if n != 1 {
		t.Fatalf("claim at the next token started %d, want 1", n)
	}
	c.add(30 * time.Minute)
	if n := len(keysClaim(t, s, 10, time.Hour)); n != 1 {
		t.Fatalf("claim at the token after started %d, want 1", n)
	}
	wantKeyRunning(t, s, "r", "r", 4)
}

// TestAdvKeysLimitLoweredAppliesToNextStarts: api runs 2 with 2 running
// (as a later key); lowered to 1, one completion leaves 1 running and no
// job naming api starts; DeleteLimit (default 1) keeps it so; a template
// raise governs api only once its own limit is gone.
func TestAdvKeysLimitLoweredAppliesToNextStarts(t *testing.T) {
	s, _ := openKeys(t)
	ctx := context.Background()
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 2}, readpast.Limit{Key: "c:*", Concurrency: 10})
	js := keysEnqueue(t, s, kjob("c:1", "api"), kjob("c:2", "api"), kjob("c:3", "api"), kjob("c:4", "api"))
	r := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "two of api", r, js[0], js[1])
	keysPut(t, s, readpast.Limit{Key: "api", Concurrency: 1})
	keysComplete(t, s, r[0])
	wantJobs(t, "api lowered to 1 with 1 running", keysClaim(t, s, 10, time.Minute))
	if err := s.DeleteLimit(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	wantJobs(t, "api at the default 1", keysClaim(t, s, 10, time.Minute))
	keysPut(t, s, readpast.Limit{Key: "a*", Concurrency: 3})
	got := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "template a* raises api to 3", got, js[2], js[3])
	wantKeyRunning(t, s, "api", "api", 3)
	wantWaiters(t, s, "api", "api")
}

// TestAdvKeysWaiterTemplateRaise: c:1 waits for c:api (full, governed by
// c:*); raising c:* marks it and a claim right after starts its job.
func TestAdvKeysWaiterTemplateRaise(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
	js := keysEnqueue(t, s, kjob("x", "c:api"), kjob("c:1", "c:api"))
	wantJobs(t, "x", keysClaim(t, s, 10, time.Minute), js[0])
	wantWaiters(t, s, "c:1 waits", "c:api", "c:1")
	keysPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 2})
	wantJobs(t, "after the template raise", keysClaim(t, s, 10, time.Minute), js[1])
}

// TestAdvKeysWaiterAcrossStores: one store's claim makes g a waiter of
// api; the other store completes api's job; the first store's claim
// right after returns g's job; and the reverse, with Fail and Release.
func TestAdvKeysWaiterAcrossStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "two.db")
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	js := keysEnqueue(t, a, kjob("x", "api"), kjob("g", "api"), kjob("h", "api"), kjob("i", "api"))
	r := keysClaim(t, a, 10, time.Minute)
	wantJobs(t, "x on a", r, js[0])
	wantWaiters(t, b, "g, h, i wait", "api", "g", "h", "i")
	keysComplete(t, b, r...)
	r = keysClaim(t, a, 10, time.Minute)
	wantJobs(t, "g on a after b completed", r, js[1])
	if _, err := a.Fail(ctx, []readpast.Failure{{ID: r[0].ID, Token: r[0].Token, Discard: true}}); err != nil {
		t.Fatal(err)
	}
	r = keysClaim(t, b, 10, time.Minute)
	wantJobs(t, "h on b after a failed g", r, js[2])
	if err := a.Release(ctx, r[0].ID, r[0].Token); err != nil {
		t.Fatal(err)
	}
	// Keys take turns: h was served, so i may come first.
	seen := map[int64]bool{}
	for i := 0; i < 2; i++ {
		r = keysClaim(t, b, 10, time.Minute)
		if len(r) != 1 {
			t.Fatalf("after api freed on a: claimed %v", jobIDs(r))
		}
		seen[r[0].ID] = true
		keysComplete(t, a, r...)
	}
	if !seen[js[2].ID] || !seen[js[3].ID] {
		t.Fatalf("started %v", seen)
	}
	wantNoKeyState(t, a, "done")
}

// TestAdvKeysRetryRunNowFlow: a failed multi-key job retried from
// history, a future one made due with RunNow, and a flow child naming the
// full key: each waits for api and starts as it frees.
func TestAdvKeysRetryRunNowFlow(t *testing.T) {
	s, _ := openKeys(t)
	ctx := context.Background()
	js := keysEnqueue(t, s, kjob("g1", "api"))
	r := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "g1", r, js[0])
	if _, err := s.Fail(ctx, []readpast.Failure{{ID: r[0].ID, Token: r[0].Token, Discard: true}}); err != nil {
		t.Fatal(err)
	}
	wantNoKeyState(t, s, "after discard")
	busy := keysEnqueue(t, s, kjob("z", "api"))[0]
	rb := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "busy", rb, busy)
	if _, err := s.Retry(ctx, js[0].ID); err != nil {
		t.Fatal(err)
	}
	later := kjob("g2", "api")
	later.RunAt = time.Now().Add(time.Hour)
	fut := keysEnqueue(t, s, later)[0]
	if _, err := s.RunNow(ctx, fut.ID); err != nil {
		t.Fatal(err)
	}
	flow, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "p"}},
		{Ref: "c", Job: kjob("g3", "api"), After: []readpast.After{{Ref: "p"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "the flow's parent only (api full)", p, flow[0])
	keysComplete(t, s, p...)
	wantJobs(t, "nothing while api is busy", keysClaim(t, s, 10, time.Minute))
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		keysComplete(t, s, rb...)
		rb = keysClaim(t, s, 10, time.Minute)
		if len(rb) != 1 {
			t.Fatalf("after api freed (%d): claimed %v", i, jobIDs(rb))
		}
		seen[rb[0].ID] = true
	}
	if !seen[js[0].ID] || !seen[fut.ID] || !seen[flow[1].ID] {
		t.Fatalf("started %v", seen)
	}
	keysComplete(t, s, rb...)
	wantNoKeyState(t, s, "done")
}

// TestAdvKeysBulkCancelRunning: bulk cancel of running jobs of several
// keys frees every key; rescue of an expired multi-key lease vs a late
// completion frees once.
func TestAdvKeysBulkCancelRunning(t *testing.T) {
	s, c := openKeys(t)
	ctx := context.Background()
	keysPut(t, s, readpast.Limit{Key: "g", Concurrency: 5}, readpast.Limit{Key: "api", Concurrency: 5})
	keysEnqueue(t, s, kjob("g", "api", "b"), kjob("g", "api"), kjob("g", "b", "api"))
	r := keysClaim(t, s, 10, time.Minute)
	if len(r) != 2 { // b runs 1
		t.Fatalf("claimed %v", jobIDs(r))
	}
	n, err := s.BulkCancel(ctx, readpast.JobFilter{Group: "g", State: readpast.StateRunning})
	if err != nil || n != 2 {
		t.Fatalf("bulk cancel: %d %v", n, err)
	}
	r = keysClaim(t, s, 10, time.Second)
	wantKeyRunning(t, s, "g", "g", 1)
	wantKeyRunning(t, s, "b", "b", 1)
	c.add(2 * time.Second)
	if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("rescue %d %v", n, err)
	}
	res, err := s.Complete(ctx, []readpast.Completion{{ID: r[0].ID, Token: r[0].Token}})
	if err != nil || res[0] == nil {
		t.Fatalf("late completion: %v %v", res, err)
	}
	wantNoKeyState(t, s, "after rescue and a late completion")
	r = keysClaim(t, s, 10, time.Minute)
	keysComplete(t, s, r...)
	wantNoKeyState(t, s, "done")
}
