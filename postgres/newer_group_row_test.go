package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// waitForRowWaiter returns once some statement on s's database waits for
// another transaction (a row lock held by an open transaction).
func waitForRowWaiter(t *testing.T, s *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := s.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype IN ('transactionid', 'tuple')`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waited for the stalled transaction")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestFinisherSeesAGroupRowNewerThanItsSnapshot: a cancel takes its
// snapshot while a claim is creating a group's row and starting the
// group's head (neither committed); the cancel then ends that head, which
// is running by the time it locks it. The group's row is not in the
// cancel's snapshot, yet its slot must be given back: a counter left at 1
// with nothing running would keep a group of limit 1 from ever running
// again. BulkCancel meets the same row through the opposite order (its
// snapshot first, then the claim commits, then it locks the job).
func TestFinisherSeesAGroupRowNewerThanItsSnapshot(t *testing.T) {
	ctx := context.Background()
	wantNextClaimable := func(t *testing.T, s *postgres.Store) {
		t.Helper()
		if g := checkGroups(t, s)["N"]; g.Counter != 0 {
			t.Errorf("group N after its running job was cancelled: %+v, want nothing running", g)
		}
		groupJobs(t, s, "N", 1)
		if next := mustClaim(t, s, "next", 10); len(next) != 1 {
			t.Errorf("after the cancel claimed %d of N, want 1 (its limit)", len(next))
		}
		checkGroups(t, s)
	}

	for _, rowBefore := range []bool{false, true} {
		name := "cancel, claim creates the row"
		if rowBefore {
			name = "cancel, claim counts in the row"
		}
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			if rowBefore {
				if err := s.SetGroupLimit(ctx, "N", 1); err != nil {
					t.Fatal(err)
				}
			}
			jobs := groupJobs(t, s, "N", 2)
			claimer := newStall(t, s, "claim.end") // N's row inserted, J1 running, not committed
			var got []*readpast.Job
			claimed := stalledClaim(t, claimer, 10, &got)
			cancelled := async(func() error { _, err := s.Cancel(ctx, jobs[0].ID); return err })
			waitForRowWaiter(t, s) // the cancel's snapshot is older than the claim's commit
			claimer.open()
			within(t, "the claim", 2*time.Second, claimed)
			within(t, "the cancel", 2*time.Second, cancelled)
			if len(got) != 1 || got[0].ID != jobs[0].ID {
				t.Fatalf("the claim took %v, want N's head %d", got, jobs[0].ID)
			}
			wantNextClaimable(t, s)
		})
	}

	t.Run("bulk cancel", func(t *testing.T) {
		s := newStore(t)
		defer s.Close()
		jobs := groupJobs(t, s, "N", 2)
		canceller := newStall(t, s, "bulk.before_locks") // snapshot taken, no row locked
		var n int
		cancelled := async(func() error {
			var err error
			n, err = canceller.store.BulkCancel(ctx, readpast.JobFilter{Group: "N"})
			return err
		})
		canceller.waitBlocked()
		got := mustClaim(t, s, "w", 10) // creates N's row: not in the bulk cancel's snapshot
		if len(got) != 1 || got[0].ID != jobs[0].ID {
			t.Fatalf("the claim took %v, want N's head %d", got, jobs[0].ID)
		}
		canceller.open()
		within(t, "the bulk cancel", 2*time.Second, cancelled)
		if n != 2 {
			t.Fatalf("the bulk cancel cancelled %d jobs, want both of N's", n)
		}
		wantNextClaimable(t, s)
	})
}

// TestClaimCreatingAKeyRowNeverWaitsOnItsUpdate: a claim whose snapshot
// shows no row for key K stops before the key rows (claim.group_rows).
// Another claim creates K's row and commits; a third, in a transaction
// left open, takes another job of K and so updates K's row. The first
// claim goes on and holds K's try-lock. Inserting K's row ON CONFLICT DO
// NOTHING would wait for the open transaction that updated the
// conflicting row (and, holding other key rows, could deadlock with a
// finisher); the claim must instead pass K over and return at once.
func TestClaimCreatingAKeyRowNeverWaitsOnItsUpdate(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "K", Concurrency: 5})
	keyJobs(t, s, "K", "qa", 2)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qb", Group: "K", Priority: -1}, {Kind: "k", Queue: "qb", Group: "K", Priority: -1}}); err != nil {
		t.Fatal(err)
	}
	first := newStall(t, s, "claim.group_rows")
	done := async(func() error {
		_, err := first.store.Claim(ctx, claimQ("first", 10, "qa"))
		return err
	})
	first.waitBlocked() // no row for K in its snapshot
	if got := claimWithin(t, "the claim creating K's row", 2*time.Second, s, claimQ("second", 1, "qb")); len(got) != 1 {
		t.Fatalf("the second claim took %d jobs of K, want 1", len(got))
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if held, err := postgres.ClaimTx(ctx, tx, claimQ("third", 1, "qb")); err != nil || len(held) != 1 {
		t.Fatalf("the third claim took %d jobs of K (%v), want 1", len(held), err)
	}
	first.open()
	within(t, "a claim that meets a key row created since its snapshot, and updated by a transaction still open", 0, done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}
