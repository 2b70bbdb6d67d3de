package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func testLeaseExpiry(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go readpast.RunRescuer(ctx, s, 100*time.Millisecond, discardLogger())
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 5})[0]
	const lease = time.Second
	first := claim(t, s, 1, lease)[0]
	expiry := *first.LeaseExpiresAt
	if got := claim(t, s, 1, lease); len(got) != 0 {
		t.Fatalf("claimed %v while the lease was valid", ids(got))
	}
	var again []*readpast.Job
	for len(again) == 0 {
		if time.Since(expiry) > time.Second {
			t.Fatalf("job not claimable again within 1s of its lease expiring")
		}
		time.Sleep(10 * time.Millisecond)
		again = claim(t, s, 1, time.Minute)
	}
	if now := time.Now(); now.Before(expiry) {
		t.Fatalf("re-claimed at %v, before the lease expired at %v", now, expiry)
	}
	if again[0].ID != j.ID || again[0].Attempt != 2 {
		t.Fatalf("re-claimed %+v, want job %d at attempt 2", again[0], j.ID)
	}
	if len(again[0].Errors) != 1 || again[0].Errors[0].Attempt != 1 || again[0].Errors[0].Message == "" {
		t.Fatalf("expiry not recorded as a failed attempt: %+v", again[0].Errors)
	}
}

func testLeaseExpiryMaxAttempts(t *testing.T, h Harness) {
	s := newStore(t, h)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 2})[0]
	const lease = 100 * time.Millisecond
	for attempt := 1; attempt <= 2; attempt++ {
		c := claim(t, s, 1, lease)
		if len(c) != 1 || c[0].Attempt != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, c)
		}
		expire(t, s, lease)
	}
	f := wantState(t, s, j.ID, readpast.StateFailed)
	if f.Attempt != 2 || len(f.Errors) != 2 || f.FinishedAt == nil {
		t.Fatalf("failed job: attempt %d, %d errors, finished %v", f.Attempt, len(f.Errors), f.FinishedAt)
	}
	if c := claim(t, s, 1, lease); len(c) != 0 {
		t.Fatalf("a job with no attempts left was claimed again: %v", ids(c))
	}
}

func testExtend(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k"})
	const lease = time.Second
	c := claim(t, s, 1, lease)[0]
	for range 3 {
		time.Sleep(lease / 2)
		called := time.Now()
		exp, err := s.Extend(ctx, c.ID, c.Token, lease)
		if err != nil {
			t.Fatal(err)
		}
		// The new lease runs from the call (the database's clock, the
		// same host's here, within a little skew), however slow the call.
		if exp.Before(called.Add(lease - 100*time.Millisecond)) {
			t.Fatalf("extended at %v for %v, the lease ends %v: too soon", called, lease, exp)
		}
		ok(s.RescueExpired(ctx, 100)).must(t)
	}
	// 1.5 s after a 1 s lease: still ours, because we kept extending.
	if err := completeOne(ctx, s, c, ""); err != nil {
		t.Fatalf("complete after extending: %v", err)
	}
	if _, err := s.Extend(ctx, c.ID, c.Token, 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("extend by 0: %v", err)
	}
}

func testFailRetries(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 2, Group: "fg"})[0]
	c := claim(t, s, 1, time.Minute)[0]
	retryAt := time.Now().Add(300 * time.Millisecond)
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "boom", Stack: "stack here", RetryAt: retryAt}); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, s, j.ID, readpast.StatePending)
	if len(p.Errors) != 1 || p.Errors[0].Message != "boom" || p.Errors[0].Stack != "stack here" || p.Errors[0].Attempt != 1 || p.Errors[0].Worker == "" {
		t.Fatalf("error not recorded: %+v", p.Errors)
	}
	if p.RunAt.Before(retryAt.Add(-time.Millisecond)) {
		t.Fatalf("retry run_at %v, want %v", p.RunAt, retryAt)
	}
	if c := claim(t, s, 1, time.Minute); len(c) != 0 {
		t.Fatal("claimed before the retry time")
	}
	time.Sleep(time.Until(retryAt) + 10*time.Millisecond)
	c = claim(t, s, 1, time.Minute)[0]
	if c.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", c.Attempt)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "boom again"}); err != nil {
		t.Fatal(err)
	}
	f := wantState(t, s, j.ID, readpast.StateFailed)
	if len(f.Errors) != 2 || f.Errors[1].Message != "boom again" || f.FinishedAt == nil {
		t.Fatalf("final failure: %+v", f)
	}
	// The group slot was freed: another job of the group runs.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "fg"})
	if c := claim(t, s, 1, time.Minute); len(c) != 1 {
		t.Fatal("group still blocked after its job failed for good")
	}
}

func testFailDiscard(t *testing.T, h Harness) {
	s := newStore(t, h)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", MaxAttempts: 10})[0]
	c := claim(t, s, 1, time.Minute)[0]
	if err := failOne(ctxT(t), s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "fatal", Discard: true}); err != nil {
		t.Fatal(err)
	}
	wantState(t, s, j.ID, readpast.StateFailed)
}

func testRelease(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "rg"})[0]
	c := claim(t, s, 1, time.Minute)[0]
	if err := s.Release(ctx, c.ID, c.Token); err != nil {
		t.Fatal(err)
	}
	p := wantState(t, s, j.ID, readpast.StatePending)
	if p.Attempt != 0 {
		t.Fatalf("released attempt counted: %d", p.Attempt)
	}
	c2 := claim(t, s, 1, time.Minute)
	if len(c2) != 1 || c2[0].Attempt != 1 {
		t.Fatalf("released job not claimable at once (group slot freed): %+v", c2)
	}
	if err := s.Release(ctx, c.ID, c.Token); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("release with old token: %v", err)
	}
}

func testCancelRetry(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	pending := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Priority: 1})[0]
	running := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "cg"})[0]
	rc := claim(t, s, 1, time.Minute)[0]
	if rc.ID != running.ID {
		t.Fatalf("claimed %d, want %d", rc.ID, running.ID)
	}
	for _, id := range []int64{pending.ID, running.ID} {
		j, err := s.Cancel(ctx, id)
		if err != nil || j.State != readpast.StateCancelled || j.FinishedAt == nil {
			t.Fatalf("cancel %d: %+v %v", id, j, err)
		}
	}
	if err := completeOne(ctx, s, rc, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete after cancel: %v", err)
	}
	if _, err := s.Cancel(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("cancel a cancelled job: %v", err)
	}
	if _, err := s.Cancel(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	// Retry brings it back with the same id, attempts reset, errors kept.
	r, err := s.Retry(ctx, running.ID)
	if err != nil || r.State != readpast.StatePending || r.Attempt != 0 || r.ID != running.ID {
		t.Fatalf("retry: %+v %v", r, err)
	}
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != running.ID {
		t.Fatalf("after retry claimed %v, want [%d] (group slot freed by cancel)", ids(c), running.ID)
	}
	if _, err := s.Retry(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("retry a running job: %v", err)
	}
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry(ctx, running.ID); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("retry a succeeded job: %v", err)
	}
	if _, err := s.Retry(ctx, 987654); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
	// Retrying a pending job makes it run now.
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(time.Hour)})[0]
	if r, err := s.Retry(ctx, later.ID); err != nil || time.Until(r.RunAt) > time.Second {
		t.Fatalf("retry pending: %+v %v", r, err)
	}
	if c := claim(t, s, 1, time.Minute); len(c) != 1 || c[0].ID != later.ID {
		t.Fatalf("retried pending job not claimable now: %v", ids(c))
	}
}

func testListStats(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	for i := range 25 {
		q := "qa"
		if i%5 == 0 {
			q = "qb"
		}
		enqueue(t, s, readpast.EnqueueParams{Kind: fmt.Sprintf("k%d", i%2), Queue: q, Group: map[bool]string{true: "lg"}[i == 3]})
	}
	c := claim(t, s, 2, time.Minute, "qa")
	if err := completeOne(ctx, s, c[0], ""); err != nil {
		t.Fatal(err)
	}
	var all []*readpast.Job
	cursor := ""
	for {
		page := ok(s.List(ctx, readpast.ListParams{Limit: 7, Cursor: cursor})).must(t)
		all = append(all, page.Jobs...)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(all) != 25 {
		t.Fatalf("paged through %d jobs, want 25", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatal("list not newest first")
		}
	}
	check := func(p readpast.ListParams, want int) {
		t.Helper()
		got := ok(s.List(ctx, p)).must(t)
		if len(got.Jobs) != want {
			t.Fatalf("list %+v: %d jobs, want %d", p, len(got.Jobs), want)
		}
	}
	check(readpast.ListParams{Queue: "qb"}, 5)
	check(readpast.ListParams{State: readpast.StateSucceeded}, 1)
	check(readpast.ListParams{State: readpast.StateRunning}, 1)
	check(readpast.ListParams{Kind: "k1"}, 12)
	check(readpast.ListParams{Group: "lg"}, 1)
	if _, err := s.List(ctx, readpast.ListParams{State: "bogus"}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bad state filter: %v", err)
	}
	if _, err := s.List(ctx, readpast.ListParams{Cursor: "x"}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("bad cursor: %v", err)
	}
	stats := ok(s.Stats(ctx)).must(t)
	got := map[string]int64{}
	for _, st := range stats {
		got[st.Queue+"/"+string(st.State)] = st.Count
	}
	want := map[string]int64{"qa/pending": 18, "qa/running": 1, "qa/succeeded": 1, "qb/pending": 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats %v, want %v", got, want)
	}
}

func testPrune(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, make5("k")...)
	for _, c := range claim(t, s, 3, time.Minute) {
		if err := completeOne(ctx, s, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	n := ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(time.Second), Limit: 2})).must(t)
	if n != 2 {
		t.Fatalf("pruned %d, want 2 (batch limit)", n)
	}
	n = ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateFailed, Before: time.Now().Add(time.Second)})).must(t)
	if n != 0 {
		t.Fatalf("pruned %d failed jobs, want 0", n)
	}
	n = ok(s.Prune(ctx, readpast.PruneParams{State: readpast.StateSucceeded, Before: time.Now().Add(-time.Hour)})).must(t)
	if n != 0 {
		t.Fatalf("pruned %d jobs finished after the cutoff", n)
	}
	if _, err := s.Prune(ctx, readpast.PruneParams{State: readpast.StatePending}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("prune live state: %v", err)
	}
	if got := len(ok(s.List(ctx, readpast.ListParams{})).must(t).Jobs); got != 3 {
		t.Fatalf("%d jobs left, want 3", got)
	}
}
