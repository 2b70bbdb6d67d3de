package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestAdvLimitRaisedWhileClaimRegistersWaiter: a claim holding K's row
// (stopped at claim.fit) finds K full and writes A as its waiter; a
// PutLimit raising K's limit runs meanwhile (it passes K over under the
// limits' lock, then waits for K's row). A must be marked once the raise
// reaches the row, and J claimed.
func TestAdvLimitRaisedWhileClaimRegistersWaiter(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	// A's row exists (the claim creates none, so it takes no limits lock)
	advComplete(t, s, func() []*readpast.Job { advEnq(t, s, []string{"A"}); return mustClaim(t, s, "w", 1) }()...)
	advEnq(t, s, []string{"K"})
	if run := mustClaim(t, s, "w", 10); len(run) != 1 {
		t.Fatalf("claimed %v, want K's job", claimedIDs(run))
	}
	j := advEnq(t, s, []string{"A", "K"})[0]
	claimer := newStall(t, s, "claim.fit")
	var got []*readpast.Job
	claimed := stalledClaim(t, claimer, 10, &got)
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "K", Concurrency: 2})
		return err
	})
	advWaitAnyLock(t, s)
	claimer.open()
	within(t, "the claim", 2*time.Second, claimed)
	within(t, "the limit change", 5*time.Second, put)
	if len(got) != 0 {
		t.Fatalf("the stalled claim took %v with K full", claimedIDs(got))
	}
	next := mustClaim(t, s, "w", 10)
	if len(next) != 1 || next[0].ID != j.ID {
		t.Errorf("after K's limit was raised the claim took %v, want J %d (A due marks %d, K waiters %v)",
			claimedIDs(next), j.ID, dueMarks(t, s, "A"), advWaiters(t, s, "K"))
	}
	checkGroups(t, s)
}

// TestAdvSharedBudgetFirstAndLater: K (limit 2) is the first key of two
// jobs and a later key of three others, all in one claim: exactly two
// jobs naming K start, whatever their first keys, and the counters match.
func TestAdvSharedBudgetFirstAndLater(t *testing.T) {
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 2})
	advPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	advEnq(t, s, []string{"c:1", "K"}, []string{"K"}, []string{"c:2", "K"}, []string{"K", "c:1"}, []string{"c:1", "c:3", "K"}, []string{"c:4"})
	total := 0
	for round := 0; round < 6; round++ {
		got := mustClaim(t, s, "w", 10)
		nK := 0
		for _, j := range got {
			for _, k := range j.Keys {
				if k == "K" {
					nK++
				}
			}
		}
		g := checkGroups(t, s)
		if g["K"].Counter > 2 {
			t.Fatalf("round %d: K runs %d", round, g["K"].Counter)
		}
		total += len(got)
		for _, j := range got {
			advComplete(t, s, j)
		}
	}
	if total != 6 {
		t.Errorf("claimed %d of 6 jobs over the rounds", total)
	}
}

// TestAdvThrottledLaterKeyWakes: R (1 start a second, burst 1) is a
// later key of jobs of c:1..c:3. A claim starts one; the others' first
// keys are marked at R's next start and a due: notice announces it; a
// claim then takes one more, a second after the first.
func TestAdvThrottledLaterKeyWakes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "R", Concurrency: 10, Rate: 1, Per: time.Second, Burst: 1})
	advEnq(t, s, []string{"c:1", "R"}, []string{"c:2", "R"}, []string{"c:3", "R"})
	conn, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN readpast"); err != nil {
		t.Fatal(err)
	}
	first := mustClaim(t, s, "w", 10)
	if len(first) != 1 {
		t.Fatalf("claimed %v, want one (R has one token)", claimedIDs(first))
	}
	var sawDue bool
	for {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		if strings.HasPrefix(n.Payload, "due:") {
			sawDue = true
		}
	}
	if !sawDue {
		t.Errorf("no due: notice for R's next start")
	}
	if got := mustClaim(t, s, "w", 10); len(got) != 0 {
		t.Errorf("claimed %v before R's next token", claimedIDs(got))
	}
	time.Sleep(time.Until(first[0].StartedAt.Add(time.Second + 50*time.Millisecond)))
	second := mustClaim(t, s, "w", 10)
	if len(second) != 1 {
		t.Fatalf("a second after, claimed %v, want one", claimedIDs(second))
	}
	if d := second[0].StartedAt.Sub(*first[0].StartedAt); d < time.Second {
		t.Errorf("second start %v after the first, rate 1/s burst 1", d)
	}
	checkGroups(t, s)
}

// TestAdvBulkCancelRunningMultiKey: BulkCancel of running jobs naming
// several keys frees every key; a stale completion afterwards changes
// nothing; waiters of a freed key are marked.
func TestAdvBulkCancelRunningMultiKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 2})
	advEnq(t, s, []string{"a", "K", "L"}, []string{"b", "L", "K"})
	run := mustClaim(t, s, "w", 10)
	if len(run) != 1 {
		// L runs one at a time
		t.Logf("claimed %v", claimedIDs(run))
	}
	waiting := advEnq(t, s, []string{"c", "L"})[0]
	if got := mustClaim(t, s, "w", 10); len(got) != 0 {
		t.Fatalf("claimed %v with L full", claimedIDs(got))
	}
	n, err := s.BulkCancel(ctx, readpast.JobFilter{State: readpast.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(run) {
		t.Errorf("bulk cancelled %d, want %d", n, len(run))
	}
	checkGroups(t, s)
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: run[0].ID, Token: run[0].Token}})
	if err != nil || len(errs) != 1 || errs[0] == nil {
		t.Errorf("stale completion: %v %v", errs, err)
	}
	checkGroups(t, s)
	// L runs one at a time: b's job and c's job, one after the other
	seen := 0
	for round := 0; round < 3; round++ {
		got := mustClaim(t, s, "w", 10)
		if len(got) > 1 {
			t.Errorf("claimed %v at once, L runs one", claimedIDs(got))
		}
		seen += len(got)
		checkGroups(t, s)
		advComplete(t, s, got...)
	}
	if seen != 2 {
		t.Errorf("after the bulk cancel claimed %d of the 2 jobs left (waiting %d)", seen, waiting.ID)
	}
}

// TestAdvRescueThenLateComplete: a job [A, K] whose lease expired is
// rescued while its late completion is stopped before its locks; the job
// is claimed again; the late completion then finds a stale token and
// frees nothing.
func TestAdvRescueThenLateComplete(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advEnq(t, s, []string{"A", "K"})
	run, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1, Lease: 50 * time.Millisecond})
	if err != nil || len(run) != 1 {
		t.Fatal(run, err)
	}
	time.Sleep(100 * time.Millisecond)
	completer := newStall(t, s, "complete.before_locks")
	done := async(func() error {
		_, err := completer.store.Complete(ctx, []readpast.Completion{{ID: run[0].ID, Token: run[0].Token}})
		return err
	})
	completer.waitBlocked()
	if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
		t.Fatalf("rescued %d, %v", n, err)
	}
	again := mustClaim(t, s, "w2", 10)
	if len(again) != 1 {
		t.Fatalf("claimed %v after the rescue", claimedIDs(again))
	}
	completer.open()
	within(t, "the late completion", 5*time.Second, done)
	g := checkGroups(t, s)
	if g["A"].Counter != 1 || g["K"].Counter != 1 {
		t.Errorf("after a stale completion A %+v K %+v, want 1 running each", g["A"], g["K"])
	}
}

// TestAdvPruneLaterKeyDuringClaim: a claim's snapshot shows K's row (idle);
// it stops before locking the later keys (claim.more_keys) and K's row is
// pruned. The claim must not wait and must not run J without K's row;
// the next claim takes J.
func TestAdvPruneLaterKeyDuringClaim(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advEnq(t, s, []string{"K"})
	r := mustClaim(t, s, "w", 1)
	advComplete(t, s, r...)
	j := advEnq(t, s, []string{"A", "K"})[0]
	claimer := newStall(t, s, "claim.more_keys")
	var got []*readpast.Job
	claimed := stalledClaim(t, claimer, 10, &got)
	n, err := s.PruneGroups(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pruned %d rows", n)
	claimer.open()
	within(t, "the claim", 2*time.Second, claimed)
	checkGroups(t, s)
	if len(got) == 0 {
		next := mustClaim(t, s, "w", 10)
		if len(next) != 1 || next[0].ID != j.ID {
			t.Errorf("after the pruned-row claim took nothing, the next took %v, want %d (A due marks %d)", claimedIDs(next), j.ID, dueMarks(t, s, "A"))
		}
	}
	checkGroups(t, s)
}

// advWaitAnyLock returns once some session waits for any lock.
func advWaitAnyLock(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var locks []string
		err := s.Pool().QueryRow(context.Background(),
			`SELECT coalesce(array_agg(locktype || ' ' || mode), '{}') FROM pg_locks WHERE NOT granted AND NOT (locktype = 'advisory' AND mode = 'ShareLock' AND objsubid = 1)`).Scan(&locks)
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) > 0 {
			t.Logf("waiting: %v", locks)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing waited")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
