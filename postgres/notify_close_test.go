package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestCloseRacesCalls: goroutines enqueue, claim (past
// rate-limited keys, so claims return due rows), complete keyed jobs
// (trailing NOTIFYs) and fail jobs, while Close is called twice at once.
// Run with -race: no race, no panic, Close returns promptly, and nothing
// is left running.
func TestCloseRacesCalls(t *testing.T) {
	ctx := context.Background()
	base := newStore(t)
	defer base.Close()
	advPut(t, base, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 5, Per: time.Second, Burst: 1})
	advPut(t, base, readpast.Limit{Key: "c:*", Concurrency: 1})
	url := base.Pool().Config().ConnString()
	for round := range 6 {
		before := runtime.NumGoroutine()
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Subscribe(ctx); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r:%d", i%4)
					if g%2 == 0 {
						key = fmt.Sprintf("c:%d", i%4)
					}
					_, _ = s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Keys: []string{key}}})
					jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 4, Lease: time.Minute})
					if err != nil {
						continue
					}
					var cs []readpast.Completion
					var fs []readpast.Failure
					for k, j := range jobs {
						if k%3 == 2 {
							fs = append(fs, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x"})
						} else {
							cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
						}
					}
					if len(cs) > 0 {
						_, _ = s.Complete(ctx, cs)
					}
					if len(fs) > 0 {
						_, _ = s.Fail(ctx, fs)
					}
				}
			})
		}
		time.Sleep(time.Duration(100+round*50) * time.Millisecond)
		began := time.Now()
		var cw sync.WaitGroup
		for range 2 {
			cw.Go(func() { s.Close() })
		}
		closed := make(chan struct{})
		go func() { cw.Wait(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("round %d: Close did not return\n%s", round, buf[:runtime.Stack(buf, true)])
		}
		took := time.Since(began)
		close(stop)
		wg.Wait()
		s.Close() // a third time, after the callers stopped
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("round %d: two concurrent Close calls took %v; goroutines %d before, %d after", round, took.Round(time.Millisecond), before, runtime.NumGoroutine())
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("round %d: goroutines leaked: %d before, %d after\n%s", round, before, n, buf[:runtime.Stack(buf, true)])
		}
		if took > 5*time.Second {
			t.Errorf("round %d: Close took %v with a healthy database", round, took)
		}
	}
}

// TestCloseWaitsForAClaimInFlight: a claim that leaves a key out of
// tokens is stopped at the end of its statement (claim.end) when its
// store's Close begins; it then commits, and its key's next start still
// reaches the other processes: Close waits for the claims, completions
// and failures in flight (up to closeSendWait) and for what they hand
// over.
func TestCloseWaitsForAClaimInFlight(t *testing.T) {
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	advEnq(t, s, []string{"r:1"}, []string{"r:1"})
	l := advNotifyListen(t, s)
	advNotifyHeard(l, 200*time.Millisecond)
	st := newStall(t, s, "claim.end")
	var got []*readpast.Job
	claimed := stalledClaim(t, st, 10, &got)
	st.waitBlocked()
	closed := async(func() error { return st.store.Close() })
	time.Sleep(100 * time.Millisecond) // Close has begun and waits
	st.open()
	within(t, "the claim", 5*time.Second, claimed)
	within(t, "Close", 5*time.Second, closed)
	if len(got) != 1 {
		t.Fatalf("claimed %d jobs, want 1 (one token)", len(got))
	}
	if heard := advNotifyHeard(l, 500*time.Millisecond); !advNotifyHas(heard, true) {
		t.Errorf("the claim committed while its store closed, and its key's next start was not announced (heard %q)", heard)
	}
}

// TestCloseWaitsForACompletionInFlight: the same for a completion that
// frees a key's only slot, stopped before the key's row
// (finish.group_rows) when its store's Close begins.
func TestCloseWaitsForACompletionInFlight(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
	advEnq(t, s, []string{"c:1"}, []string{"c:1"})
	run := mustClaim(t, s, "w", 10)
	if len(run) != 1 {
		t.Fatalf("claimed %d jobs, want 1 (one slot)", len(run))
	}
	l := advNotifyListen(t, s)
	advNotifyHeard(l, 200*time.Millisecond)
	st := newStall(t, s, "finish.group_rows")
	completed := async(func() error {
		errs, err := st.store.Complete(ctx, []readpast.Completion{{ID: run[0].ID, Token: run[0].Token}})
		if err != nil {
			return err
		}
		return errs[0]
	})
	st.waitBlocked()
	closed := async(func() error { return st.store.Close() })
	time.Sleep(100 * time.Millisecond)
	st.open()
	within(t, "the completion", 5*time.Second, completed)
	within(t, "Close", 5*time.Second, closed)
	if heard := advNotifyHeard(l, 500*time.Millisecond); !advNotifyHas(heard, false) {
		t.Errorf("the completion freed a slot while its store closed, and nobody was woken (heard %q)", heard)
	}
}
