package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// A statement that ends running jobs of a key with room (its row's running
// count below its concurrency) counts the freed slot aside, taking the
// key's row FOR KEY SHARE, which no claim's lock conflicts with; claims
// fold a key's counts into its row as they lock it. These tests replay the
// windows of that design (docs/design/flow-control.md, "Keys with room").

// TestClaimBesideACompletionOfAKeyWithRoom: a caller's CompleteTx of a job
// of a key with room holds the key's row until the caller commits; a claim
// meanwhile takes the key's next job. When completions gave every slot
// back on the row, the claim passed the key over for as long.
func TestClaimBesideACompletionOfAKeyWithRoom(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	got := keyWithRunning(t, s, "a", 3, 3, 1)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w2", 1, "qa")); n != 1 {
		t.Errorf("a claim beside an open completion of a took %d of its jobs, want 1", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if n := len(ubClaimAll(t, s, "w3", 10, "qa")); n != 1 {
		t.Errorf("a claim after the commit took %d of a (1 of 3 running), want 1", n)
	}
	checkGroups(t, s)
}

// TestCompletionBesideAClaimFillingTheKey: a completion sees its key with
// room and counts its slot aside while a claim, holding the key's row
// (claim.group_heads), fills the key: the key's row then reads full with
// a slot free. The next completion of the key finds it full, gives its
// slot back on the row and marks the key; the claim that reads it folds
// the count, so both free slots are used at once. Without the claim's
// fold, that claim took one job and the other slot stayed idle until a
// Tidy.
func TestCompletionBesideAClaimFillingTheKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	first := keyWithRunning(t, s, "a", 2, 5, 1) // a: 1 of 2
	claiming := newStall(t, s, "claim.group_heads")
	var second []*readpast.Job
	claimed := async(func() (err error) {
		second, err = claiming.store.Claim(ctx, claimQ("w2", 5, "qa"))
		return err
	})
	claiming.waitBlocked() // it holds a's row, with 1 free slot
	ubComplete(t, s, first[0])
	if r := ubRowOf(t, s, "a"); r.running != 1 || r.counts != 1 {
		t.Fatalf("a's row beside the claim: running %d counts %d; want 1, 1 (the slot counted aside)", r.running, r.counts)
	}
	claiming.open()
	within(t, "the claim", withinAtLeast, claimed)
	if len(second) != 1 {
		t.Fatalf("the claim took %d jobs of a, want 1", len(second))
	}
	checkGroups(t, s) // a: 1 running; its row reads 2, less a count of 1
	ubComplete(t, s, second[0])
	checkGroups(t, s)
	if n := len(ubClaimAll(t, s, "w3", 5, "qa")); n != 2 {
		t.Errorf("a claim after the key's next completion took %d of a (none running, 2 at once), want 2", n)
	}
	checkGroups(t, s)
}

// TestClaimFoldsOnlyCountsItDeletes: a claim whose snapshot shows a count
// of a key (claim.before_locks) that a Tidy folds before the claim locks
// the key's row: the claim reads the row's newest running count, which
// the fold lowered, and must not subtract the count again. Counting from
// its snapshot, it would start one job more than the key's concurrency.
func TestClaimFoldsOnlyCountsItDeletes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	running := keyWithRunning(t, s, "a", 3, 6, 2) // a: 2 of 3
	ubComplete(t, s, running[0])                  // counted aside: a's row reads 2, less 1
	if r := ubRowOf(t, s, "a"); r.running != 2 || r.counts != 1 {
		t.Fatalf("a's row: running %d counts %d; want 2, 1", r.running, r.counts)
	}
	claiming := newStall(t, s, "claim.before_locks")
	var got []*readpast.Job
	claimed := async(func() (err error) {
		got, err = claiming.store.Claim(ctx, claimQ("w2", 5, "qa"))
		return err
	})
	claiming.waitBlocked() // its snapshot shows the count
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if r := ubRowOf(t, s, "a"); r.running != 1 || r.counts != 0 {
		t.Fatalf("a's row after Tidy: running %d counts %d; want 1, 0", r.running, r.counts)
	}
	claiming.open()
	within(t, "the claim", withinAtLeast, claimed)
	if len(got) != 2 {
		t.Errorf("the claim took %d jobs of a (1 of 3 running), want 2", len(got))
	}
	checkGroups(t, s)
}

// TestCompletionJudgesTheRowItLocks: a completion whose snapshot shows its
// key with room, stopped before it locks the key's row
// (finish.key_share), while a claim fills the key and commits. Locking
// the row, the completion reads its newest version, full, and gives the
// slot back on it, marking the key: the next claim takes the key's next
// job at once. Judged from its snapshot, it would count the slot aside
// and mark nothing, and the key would read full with a slot free until
// its next completion.
func TestCompletionJudgesTheRowItLocks(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	one := keyWithRunning(t, s, "a", 2, 4, 1) // a: 1 of 2
	finishing := newStall(t, s, "finish.key_share")
	done := async(func() error {
		return first(finishing.store.Complete(ctx, []readpast.Completion{{ID: one[0].ID, Token: one[0].Token}}))
	})
	finishing.waitBlocked() // its snapshot: a with room
	if n := len(ubClaimAll(t, s, "w2", 5, "qa")); n != 1 {
		t.Fatalf("a claim beside the completion took %d of a, want 1 (its free slot)", n)
	}
	finishing.open()
	within(t, "the completion", withinAtLeast, done)
	if r := ubRowOf(t, s, "a"); r.running != 1 || r.counts != 0 {
		t.Errorf("a's row after the completion: running %d counts %d; want 1, 0 (the slot given back on the row)", r.running, r.counts)
	}
	if n := len(ubClaimAll(t, s, "w3", 5, "qa")); n != 1 {
		t.Errorf("a claim after the completion took %d of a (1 of 2 running), want 1", n)
	}
	checkGroups(t, s)
}

// TestAdvRoomFullInTheSnapshot: a caller's CompleteTx whose snapshot shows
// its key full (complete.before_locks) while another completion gives the
// key room, then stays open. Its slot is counted aside, the key's row held
// FOR KEY SHARE only, and a claim meanwhile takes the key's next job.
// Judging room from the snapshot, it gave the slot back on the row and
// held it until the caller committed, and claims passed the key over.
func TestAdvRoomFullInTheSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	run := keyWithRunning(t, s, "a", 2, 4, 2) // a full
	st := newStall(t, s, "complete.before_locks")
	tx, err := st.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	done := async(func() error {
		return st.store.CompleteTx(ctx, tx, readpast.Completion{ID: run[0].ID, Token: run[0].Token})
	})
	st.waitBlocked() // its snapshot: a full
	ubComplete(t, s, run[1])
	st.open()
	within(t, "the CompleteTx", withinAtLeast, done)
	if n := len(ubClaimAll(t, s, "w2", 5, "qa")); n != 1 {
		t.Errorf("a claim beside the open CompleteTx took %d of a (1 of 2 running), want 1", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The claim filled a beside the count: a reads full with a slot free
	// until its next completion or a fold.
	checkGroups(t, s)
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w3", 5, "qa")); n != 1 {
		t.Errorf("a claim after a Tidy took %d of a (1 of 2 running), want 1", n)
	}
	checkGroups(t, s)
}

// TestAdvRoomRepeatableRead: a caller's REPEATABLE READ transaction,
// whose snapshot predates a claim that filled the key, completes one of
// its jobs. Its queries read only that snapshot, so it takes the key for
// one with room and counts the slot aside: the completion succeeds (given
// back on the row, changed since the snapshot, it would fail with 40001),
// the key never runs more than its concurrency, and the slot is used once
// a fold (Tidy) or the key's next completion comes.
func TestAdvRoomRepeatableRead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	one := keyWithRunning(t, s, "a", 2, 4, 1)
	tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_groups LIMIT 1"); err != nil { // the snapshot
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w2", 5, "qa")); n != 1 {
		t.Fatalf("claimed %d, want 1 (a full)", n)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: one[0].ID, Token: one[0].Token}); err != nil {
		t.Fatalf("CompleteTx under REPEATABLE READ: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(ubClaimAll(t, s, "w3", 5, "qa")); n != 1 {
		t.Errorf("a claim after a Tidy took %d of a (1 of 2 running), want 1", n)
	}
	checkGroups(t, s)
}

// keyWithRunning puts a limit of concurrency limit on key, enqueues jobs of it
// to queue "q"+key and claims running of them at once (worker w1), which
// it returns: the key then has running of limit slots taken.
func keyWithRunning(t *testing.T, s *postgres.Store, key string, limit, jobs, running int) []*readpast.Job {
	t.Helper()
	putLimit(t, s, readpast.Limit{Key: key, Concurrency: limit})
	keyJobs(t, s, key, "q"+key, jobs)
	got := ubClaimAll(t, s, "w1", running, "q"+key)
	if len(got) != running {
		t.Fatalf("claimed %d jobs of %s, want %d", len(got), key, running)
	}
	return got
}
