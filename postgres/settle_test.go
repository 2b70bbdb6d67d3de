package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/netfault"
	"github.com/readpast/readpast/postgres"
)

// proxyTo starts a fault proxy to base's server.
func proxyTo(t *testing.T, base *postgres.Store) *netfault.Proxy {
	t.Helper()
	p, _, err := netfault.StartURL(base.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// wantAllPending fails unless every job is pending, unclaimed, with no
// attempt counted and no error recorded.
func wantAllPending(t *testing.T, s *postgres.Store, jobs []*readpast.Job) {
	t.Helper()
	for _, j := range jobs {
		g, err := s.Get(context.Background(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g.State != readpast.StatePending || g.Attempt != 0 || len(g.Errors) != 0 || g.Token != "" {
			t.Errorf("job %d: %s, attempt %d, errors %v: the lost claim was not given back", g.ID, g.State, g.Attempt, g.Errors)
		}
	}
}

// TestClaimWhoseResponseIsLost is the suspected problem of issue 7: a
// claim whose caller gives up (its context ends) after the database
// committed it. Before the fix its jobs stayed running, held by nobody,
// until their leases expired, and that counted as an attempt. Now Claim
// gives them back before it returns the error.
func TestClaimWhoseResponseIsLost(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	proxy := proxyTo(t, s)
	st := newStallVia(t, s, "claim.end", proxy.Addr())
	jobs := groupJobs(t, s, "G", 1)
	more, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, more...)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	claimed := async(func() error {
		got, err := st.store.Claim(cctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Hour})
		if err == nil {
			return errors.New("the claim succeeded although its answer was held back")
		}
		if len(got) != 0 {
			return errors.New("a failed claim returned jobs")
		}
		return nil
	})
	st.waitBlocked()      // the claim runs, at its last step
	proxy.HoldResponses() // its answer will never arrive
	st.open()             // it finishes and commits
	waitRunning(t, s, len(jobs))
	cancel()
	within(t, "the cancelled claim", 15*time.Second, claimed)
	proxy.CutAll() // the held connection: nothing more will come through it
	wantAllPending(t, s, jobs)
	checkGroups(t, s)
	// And they are claimable at once.
	if got := mustClaim(t, s, "next", 10); len(got) != len(jobs) {
		t.Fatalf("claimed %d of %d given-back jobs", len(got), len(jobs))
	}
}

// TestClaimStillRunningWhenItsCallerGivesUp: the claim statement is still
// running when its caller's context ends (here it stops at its last step),
// and the server never learns the client left (a fault proxy hides the
// close, as a network partition would), so the statement could commit
// after the caller has given up. Claim ends the session that runs it,
// waits until it is gone, and only then gives back what it took: nothing
// commits behind its back. Before the fix the claim committed once it went
// on, its jobs held by nobody.
func TestClaimStillRunningWhenItsCallerGivesUp(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	proxy := proxyTo(t, s)
	proxy.HideClientCloses()
	jobs := groupJobs(t, s, "G", 1)
	st := newStallVia(t, s, "claim.end", proxy.Addr())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	claimed := async(func() error {
		_, err := st.store.Claim(cctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Hour})
		if err == nil {
			return errors.New("the claim succeeded although its caller gave up")
		}
		return nil
	})
	st.waitBlocked()
	cancel()
	within(t, "the cancelled claim", 15*time.Second, claimed)
	st.open()
	time.Sleep(200 * time.Millisecond) // a claim that survived commits now
	wantAllPending(t, s, jobs)
	checkGroups(t, s)
	proxy.CutAll()
}

// waitRunning waits until n jobs are running.
func waitRunning(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM readpast_jobs WHERE state = 'running'").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStoreCallsReportUnavailable: with the database out of reach, every
// kind of store call fails with an error that is readpast.ErrUnavailable,
// so callers (the HTTP API's 503, a worker's retry) can tell an outage from
// a bad request.
func TestStoreCallsReportUnavailable(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	proxy := proxyTo(t, s)
	u, err := url.Parse(s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	ps, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	proxy.Close() // nothing gets through any more
	calls := map[string]func() error{
		"enqueue": func() error {
			_, err := ps.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
			return err
		},
		"claim": func() error {
			_, err := ps.Claim(ctx, claimP("w", 1))
			return err
		},
		"complete": func() error {
			_, err := ps.Complete(ctx, []readpast.Completion{{ID: 1, Token: "00000000-0000-0000-0000-000000000000"}})
			return err
		},
		"stats": func() error {
			_, err := ps.Stats(ctx)
			return err
		},
		"get": func() error {
			_, err := ps.Get(ctx, 1)
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, readpast.ErrUnavailable) {
			t.Errorf("%s with the database out of reach: %v, want ErrUnavailable", name, err)
		}
	}
}
