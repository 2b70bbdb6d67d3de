package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

func advPut(t *testing.T, s *postgres.Store, l readpast.Limit) {
	t.Helper()
	if _, err := s.PutLimit(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func advEnq(t *testing.T, s *postgres.Store, keys ...[]string) []*readpast.Job {
	t.Helper()
	ps := make([]readpast.EnqueueParams, len(keys))
	for i, k := range keys {
		ps[i] = readpast.EnqueueParams{Kind: "k", Keys: k}
	}
	jobs, err := s.Enqueue(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func advComplete(t *testing.T, s *postgres.Store, jobs ...*readpast.Job) {
	t.Helper()
	for _, j := range jobs {
		errs, err := s.Complete(context.Background(), []readpast.Completion{{ID: j.ID, Token: j.Token}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				t.Fatal(e)
			}
		}
	}
}

func advWaiters(t *testing.T, s *postgres.Store, key string) []string {
	t.Helper()
	var w []string
	err := s.Pool().QueryRow(context.Background(),
		"SELECT coalesce(waiters, '{}') FROM readpast_groups WHERE group_key = $1", key).Scan(&w)
	if err != nil {
		t.Fatalf("waiters of %s: %v", key, err)
	}
	return w
}

// TestAdvWaiterLostWhenOverfullKeyFrees: K runs 2 jobs, then its limit is
// lowered to 1 (running above the limit). J [A, K] is passed over for K
// (full), A becomes K's waiter and gets no mark. The first completion on K
// brings its free slots from -1 to 0: free_slots clears K's waiters, but
// the trigger marks waiters only when free > 0, so A is forgotten. The
// second completion frees a real slot, but K's waiters are already gone:
// A is never marked again and J is never claimed. (Failed on a05a0c8;
// passes since 65eea99, which keeps the waiters of a key still full.)
func TestAdvWaiterLostWhenOverfullKeyFrees(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 2})
	rs := advEnq(t, s, []string{"K"}, []string{"K"})
	run := mustClaim(t, s, "w", 10)
	if len(run) != 2 {
		t.Fatalf("claimed %v, want K's two jobs", claimedIDs(run))
	}
	_ = rs
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 1})
	j := advEnq(t, s, []string{"A", "K"})[0]
	if got := mustClaim(t, s, "w", 10); len(got) != 0 {
		t.Fatalf("claimed %v with K over its limit", claimedIDs(got))
	}
	t.Logf("after the blocked claim: A due marks %d, K waiters %v", dueMarks(t, s, "A"), advWaiters(t, s, "K"))
	advComplete(t, s, run[0])
	t.Logf("after first completion: A due marks %d, K waiters %v", dueMarks(t, s, "A"), advWaiters(t, s, "K"))
	if got := mustClaim(t, s, "w", 10); len(got) != 0 {
		t.Fatalf("claimed %v with K still full", claimedIDs(got))
	}
	advComplete(t, s, run[1])
	t.Logf("after second completion: A due marks %d, K waiters %v", dueMarks(t, s, "A"), advWaiters(t, s, "K"))
	got := mustClaim(t, s, "w", 10)
	if len(got) != 1 || got[0].ID != j.ID {
		t.Errorf("after K freed a slot (nothing running on it) the claim took %v, want J %d: A's waiter registration was lost", claimedIDs(got), j.ID)
	}
	checkGroups(t, s)
}

// TestAdvUnreadJobHeldBackByBlockedHead: A runs one job at a time (the
// default). Its head J1 [A, K] is held back by K (full); J2 [A] names A
// only and could run. The claim reads A's heads up to its free slots (1),
// so it reads only J1, passes it over, and leaves A without a mark (a
// waiter of K): J2 waits for K's running job to end although nothing
// holds it back.
func TestAdvUnreadJobHeldBackByBlockedHead(t *testing.T) {
	for _, conc := range []int{1, 2} {
		t.Run(map[int]string{1: "A of 1", 2: "A of 2"}[conc], func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			advPut(t, s, readpast.Limit{Key: "A", Concurrency: conc})
			advEnq(t, s, []string{"K"})
			if run := mustClaim(t, s, "w", 10); len(run) != 1 {
				t.Fatalf("claimed %v, want K's job", claimedIDs(run))
			}
			var keys [][]string
			for i := 0; i < conc; i++ {
				keys = append(keys, []string{"A", "K"})
			}
			keys = append(keys, []string{"A"})
			jobs := advEnq(t, s, keys...)
			free := jobs[len(jobs)-1]
			got := mustClaim(t, s, "w", 10)
			if len(got) != 1 || got[0].ID != free.ID {
				t.Errorf("claim took %v, want %d (names A only, A has a free slot); A due marks now %d, K waiters %v",
					claimedIDs(got), free.ID, dueMarks(t, s, "A"), advWaiters(t, s, "K"))
				got = mustClaim(t, s, "w", 10)
				t.Logf("a second claim took %v", claimedIDs(got))
			}
			checkGroups(t, s)
		})
	}
}

// TestAdvHeadHeldBackByThrottledLaterKey: as TestAdvUnreadJobHeldBackByBlockedHead,
// with K out of tokens (1 an hour) rather than full: A (one at a time) is
// marked at K's next start, an hour on, and J2, which names A only,
// waits that hour.
func TestAdvHeadHeldBackByThrottledLaterKey(t *testing.T) {
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	advEnq(t, s, []string{"K"})
	if run := mustClaim(t, s, "w", 10); len(run) != 1 {
		t.Fatalf("claimed %v, want K's job (its one token)", claimedIDs(run))
	}
	jobs := advEnq(t, s, []string{"A", "K"}, []string{"A"})
	got := mustClaim(t, s, "w", 10)
	if len(got) != 1 || got[0].ID != jobs[1].ID {
		var at time.Time
		s.Pool().QueryRow(context.Background(), "SELECT min(run_at) FROM readpast_group_ready WHERE group_key = 'A'").Scan(&at)
		t.Errorf("claim took %v, want %d (names A only, A free); A's next mark in %v", claimedIDs(got), jobs[1].ID, time.Until(at).Round(time.Minute))
	}
	checkGroups(t, s)
}

// TestAdvHeadHeldBackByHeldLaterKey: K's row is held by a transaction a
// user keeps open (CompleteTx of K's running job). A (one at a time) has
// J1 [A, K] first and J2 [A] next: every claim reads J1 alone, passes it
// over (K held), marks A again, and J2 is never claimed while the
// transaction stays open.
func TestAdvHeadHeldBackByHeldLaterKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advEnq(t, s, []string{"K"})
	run := mustClaim(t, s, "w", 10)
	if len(run) != 1 {
		t.Fatalf("claimed %v, want K's job", claimedIDs(run))
	}
	jobs := advEnq(t, s, []string{"A", "K"}, []string{"A"})
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: run[0].ID, Token: run[0].Token}); err != nil {
		t.Fatal(err)
	}
	var all []*readpast.Job
	for i := 0; i < 3; i++ {
		all = append(all, claimWithin(t, "a claim beside the open transaction", 2*time.Second, s, claimP("w", 10))...)
	}
	if len(all) != 1 || all[0].ID != jobs[1].ID {
		t.Errorf("three claims took %v while K's row was held, want %d (names A only, A free)", claimedIDs(all), jobs[1].ID)
	}
}
