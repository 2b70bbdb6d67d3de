package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// keysJobs sets "api" to run one job at a time (the first keys "c:*" many)
// and enqueues one job for each first key of firsts, naming "api" second.
func keysJobs(t *testing.T, s *postgres.Store, firsts ...string) []*readpast.Job {
	t.Helper()
	ctx := context.Background()
	for _, l := range []readpast.Limit{{Key: "api", Concurrency: 1}, {Key: "c:*", Concurrency: 100}} {
		if _, err := s.PutLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	ps := make([]readpast.EnqueueParams, len(firsts))
	for i, f := range firsts {
		ps[i] = readpast.EnqueueParams{Kind: "k", Keys: []string{f, "api"}}
	}
	jobs, err := s.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// claimedIDs returns the ids of jobs.
func claimedIDs(jobs []*readpast.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	slices.Sort(ids)
	return ids
}

// dueMarks counts key's ready marks that are due.
func dueMarks(t *testing.T, s *postgres.Store, key string) int {
	t.Helper()
	var n int
	err := s.Pool().QueryRow(context.Background(),
		"SELECT count(*) FROM readpast_group_ready WHERE group_key = $1 AND run_at <= now()", key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeyWaiterMarkedByAFreeDuringTheClaim: a claim finds "api" full,
// passes over c:2's job that names it, and leaves c:2 without a ready mark
// as a waiter of api, on api's row, which it holds. It stops once it
// holds the rows (claim.fit), before it commits; the completion of the
// job running on api then waits for api's row, and must find the waiter the claim wrote there
// whatever its snapshot, and mark c:2: else c:2's job would wait for a
// poll that never comes (no mark, no waiter left).
func TestKeyWaiterMarkedByAFreeDuringTheClaim(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	jobs := keysJobs(t, s, "c:1", "c:2")
	first := mustClaim(t, s, "w", 1)
	if len(first) != 1 || first[0].ID != jobs[0].ID {
		t.Fatalf("first claim took %v, want job %d", claimedIDs(first), jobs[0].ID)
	}
	claimer := newStall(t, s, "claim.fit")
	var got []*readpast.Job
	claimed := stalledClaim(t, claimer, 10, &got)
	completed := async(func() error {
		_, err := s.Complete(ctx, []readpast.Completion{{ID: first[0].ID, Token: first[0].Token}})
		return err
	})
	waitForRowWaiter(t, s) // the completion waits for api's row
	claimer.open()
	within(t, "the claim", 2*time.Second, claimed)
	within(t, "the completion", 2*time.Second, completed)
	if len(got) != 0 {
		t.Fatalf("the stalled claim took %v with api full, want none", claimedIDs(got))
	}
	if n := dueMarks(t, s, "c:2"); n != 1 {
		t.Fatalf("c:2 has %d due marks after api freed its slot, want 1 (its waiting job)", n)
	}
	next := mustClaim(t, s, "w", 10)
	if len(next) != 1 || next[0].ID != jobs[1].ID {
		t.Fatalf("after api freed its slot the claim took %v, want c:2's job %d", claimedIDs(next), jobs[1].ID)
	}
	checkGroups(t, s)
}

// TestKeyFreedAfterTheClaimsSnapshot: a claim's snapshot shows api full;
// it stops before it locks the rows of the keys after the first
// (claim.more_keys), and the job running on api completes meanwhile. The
// claim locks api's row as it is now, with its slot free, and takes the
// job: a decision on the snapshot's row would pass it over and, api no
// longer being freed by anyone, leave c:2 waiting for good.
func TestKeyFreedAfterTheClaimsSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	jobs := keysJobs(t, s, "c:1", "c:2")
	first := mustClaim(t, s, "w", 1)
	if len(first) != 1 {
		t.Fatalf("first claim took %v, want one job", claimedIDs(first))
	}
	claimer := newStall(t, s, "claim.more_keys")
	var got []*readpast.Job
	claimed := stalledClaim(t, claimer, 10, &got)
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: first[0].ID, Token: first[0].Token}}); err != nil {
		t.Fatal(err)
	}
	claimer.open()
	within(t, "the claim", 2*time.Second, claimed)
	if len(got) != 1 || got[0].ID != jobs[1].ID {
		t.Fatalf("the claim took %v, want c:2's job %d (api freed before the claim locked its row)", claimedIDs(got), jobs[1].ID)
	}
	checkGroups(t, s)
}

// TestKeyHeldElsewhereNeverWaits: a transaction left open holds api's
// row (a completion of a job running on api, not yet committed). A claim
// of a job naming api passes it over at once, and the job is claimed
// once that transaction ends.
func TestKeyHeldElsewhereNeverWaits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	jobs := keysJobs(t, s, "c:1", "c:2")
	first := mustClaim(t, s, "w", 1)
	if len(first) != 1 {
		t.Fatalf("first claim took %v, want one job", claimedIDs(first))
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: first[0].ID, Token: first[0].Token}); err != nil {
		t.Fatal(err)
	}
	if got := claimWithin(t, "a claim beside an open transaction holding api", 2*time.Second, s, claimP("w", 10)); len(got) != 0 {
		t.Fatalf("claimed %v while api's slot was not yet freed, want none", claimedIDs(got))
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustClaim(t, s, "w", 10); len(got) != 1 || got[0].ID != jobs[1].ID {
		t.Fatalf("after the completion committed the claim took %v, want c:2's job %d", claimedIDs(got), jobs[1].ID)
	}
	checkGroups(t, s)
}

// TestKeyWaitersCostNothing: with api full, the first keys whose jobs
// wait for it have no due ready mark (claims do not read them again and
// again) and are kept on api's row; with api out of tokens, they are
// marked at api's next start.
func TestKeyWaitersCostNothing(t *testing.T) {
	ctx := context.Background()
	t.Run("full", func(t *testing.T) {
		s := newStore(t)
		defer s.Close()
		keysJobs(t, s, "c:1", "c:2", "c:3")
		if got := mustClaim(t, s, "w", 10); len(got) != 1 {
			t.Fatalf("claimed %v, want one job (api runs one)", claimedIDs(got))
		}
		for _, k := range []string{"c:2", "c:3"} {
			if n := dueMarks(t, s, k); n != 0 {
				t.Errorf("%s has %d due marks while its job waits for api, want 0", k, n)
			}
		}
		var waiters []string
		if err := s.Pool().QueryRow(ctx, "SELECT waiters FROM readpast_groups WHERE group_key = 'api'").Scan(&waiters); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(waiters, []string{"c:2", "c:3"}) {
			t.Errorf("api's waiters %v, want [c:2 c:3]", waiters)
		}
	})
	t.Run("out of tokens", func(t *testing.T) {
		s := newStore(t)
		defer s.Close()
		keysJobs(t, s, "c:1", "c:2")
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "api", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		if got := mustClaim(t, s, "w", 10); len(got) != 1 {
			t.Fatalf("claimed %v, want one job (api has one token)", claimedIDs(got))
		}
		var at time.Time
		if err := s.Pool().QueryRow(ctx, "SELECT min(run_at) FROM readpast_group_ready WHERE group_key = 'c:2'").Scan(&at); err != nil {
			t.Fatal(err)
		}
		if d := time.Until(at); d < 59*time.Minute || d > 61*time.Minute {
			t.Errorf("c:2 is marked %v from now, want at api's next start, an hour on", d)
		}
	})
}
