package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Claims and Tidy's folds take rows SKIP LOCKED, yet PostgreSQL can make
// them wait: locking a row version that another transaction has just
// replaced, it locks the newer versions too and waits for whoever holds
// them, whatever the SKIP LOCKED. That window lies inside the server's
// row locking, out of reach of a stall, so these tests put a wait of the
// same kind (for a row another transaction holds) at a statement's stall
// point, once, and check what the statement does with it.

// rowWaitFunction is a readpast_stall that, the first time a statement
// passes place (the first readpast.rowwait_times times, when set), waits for the row readpast_test_rowwait.gate (id 1)
// FOR UPDATE: a wait for the transaction holding that row, under the
// statement's own lock_timeout, like the one PostgreSQL makes. Before
// that it takes the advisory lock hashtext(place) shared, with no
// lock_timeout, so a test holding it exclusively (rowWait.pause) can stop
// the statement there first.
const rowWaitFunction = `
DROP SCHEMA IF EXISTS readpast_test_rowwait CASCADE;
CREATE SCHEMA readpast_test_rowwait;
CREATE TABLE readpast_test_rowwait.gate (id int PRIMARY KEY);
INSERT INTO readpast_test_rowwait.gate VALUES (1);
CREATE SEQUENCE readpast_test_rowwait.met;
CREATE FUNCTION readpast_test_rowwait.readpast_stall(place text, at_row anyelement) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF place = current_setting('readpast.rowwait', true) THEN
        DECLARE
            n bigint := nextval('readpast_test_rowwait.met');
            timeout text := current_setting('lock_timeout');
        BEGIN
            IF n = 1 THEN
                PERFORM set_config('lock_timeout', '0', true);
                PERFORM pg_advisory_lock_shared(hashtext(place));
                PERFORM pg_advisory_unlock_shared(hashtext(place));
                PERFORM set_config('lock_timeout', timeout, true);
            END IF;
            IF n <= coalesce(nullif(current_setting('readpast.rowwait_times', true), ''), '1')::bigint THEN
                PERFORM 1 FROM readpast_test_rowwait.gate WHERE id = 1 FOR UPDATE;
            END IF;
        END;
    END IF;
    RETURN true;
END $$`

// rowWait is a store on base's database whose statements, the first time
// one passes place, wait for the gate row, which hold takes in a
// transaction of the test's.
type rowWait struct {
	t     *testing.T
	place string
	base  *postgres.Store
	store *postgres.Store
}

func newRowWait(t *testing.T, base *postgres.Store, place string) *rowWait {
	t.Helper()
	return newRowWaits(t, base, place, 1)
}

// newRowWaits is newRowWait whose statements wait for the gate row the
// first times times they pass place.
func newRowWaits(t *testing.T, base *postgres.Store, place string, times int) *rowWait {
	t.Helper()
	ctx := context.Background()
	if _, err := base.Pool().Exec(ctx, rowWaitFunction); err != nil {
		t.Fatal(err)
	}
	store := openWith(t, base.Pool().Config().ConnString(), "", map[string]string{
		"search_path": "readpast_test_rowwait,public", "readpast.rowwait": place,
		"readpast.rowwait_times": fmt.Sprint(times),
	})
	t.Cleanup(func() { store.Close() })
	return &rowWait{t: t, place: place, base: base, store: store}
}

// hold takes the gate row in a transaction it leaves open.
func (r *rowWait) hold() pgx.Tx {
	r.t.Helper()
	ctx := context.Background()
	tx, err := r.base.Pool().Begin(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_test_rowwait.gate WHERE id = 1 FOR UPDATE"); err != nil {
		r.t.Fatal(err)
	}
	return tx
}

// pause stops the first statement to pass the place there, before its
// wait for the gate row, until the returned function is called.
func (r *rowWait) pause() (resume func()) {
	r.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.base.Pool().Config().ConnString())
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", r.place); err != nil {
		r.t.Fatal(err)
	}
	var once bool
	resume = func() {
		if !once {
			once = true
			conn.Close(context.Background()) // ends the session, and its lock
		}
	}
	r.t.Cleanup(resume)
	return resume
}

// waitLocks returns once n statements of s's database wait for a lock of
// the given type (pg_stat_activity's wait_event: "advisory",
// "transactionid").
func waitLocks(t *testing.T, s *postgres.Store, event string, n int) {
	t.Helper()
	deadline := time.Now().Add(withinAtLeast)
	for {
		var got int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = $1`, event).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d statements waited for a lock (%s), want %d", got, event, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// met returns how many times a statement passed the place.
func (r *rowWait) met() int64 {
	r.t.Helper()
	var n int64
	if err := r.base.Pool().QueryRow(context.Background(),
		"SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM readpast_test_rowwait.met").Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// TestClaimEndsALockWaitInItsStatement: a claim that meets a wait for a
// row another transaction holds, with key rows and job rows of its own
// locked (claim.group_heads), does not wait for that transaction: it ends
// the wait, undone, and claims again, while the transaction stays open.
// Without the claim routine's lock_timeout it waits until the holder ends.
func TestClaimEndsALockWaitInItsStatement(t *testing.T) {
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	keyJobs(t, s, "a", "qa", 2)
	rw := newRowWait(t, s, "claim.group_heads")
	tx := rw.hold()
	got := claimWithin(t, "a claim meeting a held row", withinAtLeast, rw.store, claimQ("w", 1, "qa"))
	if len(got) != 1 || *got[0].Group != "a" {
		t.Fatalf("the claim took %d jobs, want a's first", len(got))
	}
	if n := rw.met(); n < 2 {
		t.Fatalf("the claim passed its stall point %d times, want the wait and then another try", n)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}

// TestClaimTriesAgainThroughABusySpell: a claim that meets a wait for a
// held row on seven tries running (claim.group_heads), as claims on key
// rows replaced often can on a loaded machine, goes on trying after short
// pauses and returns its job, without an error, while the holder stays.
// Five tries running, the claim returned the lock timeout.
func TestClaimTriesAgainThroughABusySpell(t *testing.T) {
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	keyJobs(t, s, "a", "qa", 2)
	rw := newRowWaits(t, s, "claim.group_heads", 7)
	tx := rw.hold()
	got := claimWithin(t, "a claim meeting a held row seven times", withinAtLeast, rw.store, claimQ("w", 1, "qa"))
	if len(got) != 1 || *got[0].Group != "a" {
		t.Fatalf("the claim took %d jobs, want a's first", len(got))
	}
	if n := rw.met(); n != 8 {
		t.Fatalf("the claim passed its stall point %d times, want 7 waits and then a try", n)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}

// TestClaimGivesABusySpellUp: a claim that meets a wait on every try
// returns the lock timeout once its tries have run for half a second,
// having claimed nothing.
func TestClaimGivesABusySpellUp(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	keyJobs(t, s, "a", "qa", 2)
	rw := newRowWaits(t, s, "claim.group_heads", 1_000_000)
	tx := rw.hold()
	var got []*readpast.Job
	done := async(func() (err error) {
		got, err = rw.store.Claim(ctx, claimQ("w", 1, "qa"))
		return err
	})
	select {
	case err := <-done:
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("the claim returned %v, want the lock timeout (55P03)", err)
		}
	case <-time.After(withinAtLeast):
		t.Fatalf("a claim meeting a held row on every try did not return within %v", withinAtLeast)
	}
	if len(got) != 0 {
		t.Errorf("the claim took %d jobs, want none", len(got))
	}
	if n := rw.met(); n <= 5 {
		t.Errorf("the claim passed its stall point %d times, want more than its 5 tries at once", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}

// TestClaimInALockCycleGivesWay: a claim holding key a's row waits for a
// row a transaction T holds (claim.group_heads), and T then asks for a's
// row, as a completion does: a cycle. PostgreSQL would break it after
// deadlock_timeout (1 s), failing one of them; the claim ends its wait
// within its lock_timeout instead, so T gets the row at once and the
// claim, tried again, passes the row T holds over and returns no error.
func TestClaimInALockCycleGivesWay(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	putLimit(t, s, readpast.Limit{Key: "a", Concurrency: 2})
	keyJobs(t, s, "a", "qa", 3)
	ubComplete(t, s, ubClaimAll(t, s, "w0", 1, "qa")[0]) // a's row exists
	rw := newRowWait(t, s, "claim.group_heads")
	tx := rw.hold()
	resume := rw.pause()
	claimed := make(chan []*readpast.Job, 1)
	done := async(func() error {
		got, err := rw.store.Claim(ctx, claimQ("w", 1, "qa"))
		claimed <- got
		return err
	})
	waitLocks(t, s, "advisory", 1) // the claim holds a's row, before its wait
	locked := async(func() error {
		_, err := tx.Exec(ctx, "SELECT 1 FROM readpast_groups WHERE group_key = 'a' FOR UPDATE")
		return err
	})
	waitLocks(t, s, "transactionid", 1) // T waits for the claim
	resume()                            // the claim waits for T: a cycle
	within(t, "T's lock of a's row", withinAtLeast, locked)
	within(t, "the claim", withinAtLeast, done) // a deadlock victim's error fails here
	if got := <-claimed; len(got) != 0 {
		t.Errorf("the claim took %d jobs of a, whose row T holds; want none", len(got))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ubClaimAll(t, s, "w2", 2, "qa"); len(got) != 2 {
		t.Errorf("a claim after T took %d jobs of a, want 2", len(got))
	}
	checkGroups(t, s)
}

// TestFoldsOneAtATime: while one Tidy folds freed slots (stopped before
// it locks the key's row, fold.rows), another process's Tidy folds
// nothing and returns at once. Two folds at once could deadlock, each
// waiting in PostgreSQL's locking of a row's newer versions.
func TestFoldsOneAtATime(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	got := unboundedKey(t, s, "u", 4)
	ubComplete(t, s, got[0])
	ubComplete(t, s, got[1]) // 2 counts
	folding := newStall(t, s, "fold.rows")
	done := async(func() error { _, err := folding.store.Tidy(ctx); return err })
	folding.waitBlocked()
	within(t, "a second Tidy", withinAtLeast, async(func() error { _, err := s.Tidy(ctx); return err }))
	if r := ubRowOf(t, s, "u"); r.counts != 2 {
		t.Errorf("u's counts after a second Tidy beside a fold: %d, want 2 (left to the first)", r.counts)
	}
	folding.open()
	within(t, "the first Tidy", withinAtLeast, done)
	if r := ubRowOf(t, s, "u"); r.counts != 0 || r.running != 0 {
		t.Errorf("u's row after the fold: running %d counts %d, want 0, 0", r.running, r.counts)
	}
	checkGroups(t, s)
}

// TestFoldEndsALockWait: a fold that meets a wait for a row another
// transaction holds (fold.rows) ends it, undone, and Tidy returns without
// error while the transaction stays open: the counts wait for the next
// Tidy, which folds them once the row is free.
func TestFoldEndsALockWait(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	got := unboundedKey(t, s, "u", 4)
	ubComplete(t, s, got[0])
	rw := newRowWait(t, s, "fold.rows")
	tx := rw.hold()
	within(t, "Tidy meeting a held row", withinAtLeast, async(func() error { _, err := rw.store.Tidy(ctx); return err }))
	if rw.met() != 1 {
		t.Fatalf("the fold passed its stall point %d times, want 1", rw.met())
	}
	if r := ubRowOf(t, s, "u"); r.counts != 1 {
		t.Errorf("u's counts after a fold that gave up: %d, want 1", r.counts)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.store.Tidy(ctx); err != nil && !errors.Is(err, postgres.ErrNotOwner) {
		t.Fatal(err)
	}
	if r := ubRowOf(t, s, "u"); r.counts != 0 || r.running != 1 {
		t.Errorf("u's row after the next Tidy: running %d counts %d, want 1, 0", r.running, r.counts)
	}
	checkGroups(t, s)
}

// TestLimitChangeEndsALockWait: a limit change whose statement under the
// limits' lock (held exclusively, which keeps claims from creating key
// rows) meets a wait for a row another transaction holds (limit.apply)
// ends it and is tried again, and returns while the transaction stays
// open, so claims of new keys go on.
func TestLimitChangeEndsALockWait(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	putLimit(t, s, readpast.Limit{Key: "a:*", Concurrency: 2})
	keyJobs(t, s, "a:1", "qa", 1)
	ubComplete(t, s, ubClaimAll(t, s, "w0", 1, "qa")[0]) // a:1's row exists
	rw := newRowWait(t, s, "limit.apply")
	tx := rw.hold()
	within(t, "a limit change meeting a held row", withinAtLeast, async(func() error {
		_, err := rw.store.PutLimit(ctx, readpast.Limit{Key: "a:*", Concurrency: 3})
		return err
	}))
	if rw.met() < 2 {
		t.Fatalf("the limit change passed its stall point %d times, want the wait and then another try", rw.met())
	}
	if r := ubRowOf(t, s, "a:1"); r.maxRunning != 3 {
		t.Errorf("a:1's bound after the change: %d, want 3", r.maxRunning)
	}
	keyJobs(t, s, "n:1", "qn", 1)
	if got := ubClaimAll(t, s, "w", 1, "qn"); len(got) != 1 {
		t.Errorf("a claim of a new key's job took %d, want 1", len(got))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkGroups(t, s)
}

// TestPruneGroupsEndsALockWait: PruneGroups meeting a wait for a row
// another transaction holds (prune.rows) ends it, pruning nothing this
// time, and returns while the transaction stays open; the next prunes.
func TestPruneGroupsEndsALockWait(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	t.Cleanup(func() { s.Close() }) // after the cleanups below end what a wait holds
	keyJobs(t, s, "p", "qa", 1)
	ubComplete(t, s, ubClaimAll(t, s, "w0", 1, "qa")[0]) // p's row, idle
	rw := newRowWait(t, s, "prune.rows")
	tx := rw.hold()
	var n int
	within(t, "PruneGroups meeting a held row", withinAtLeast, async(func() (err error) {
		n, err = rw.store.PruneGroups(ctx, 100)
		return err
	}))
	if rw.met() != 1 || n != 0 {
		t.Fatalf("PruneGroups passed its stall point %d times and pruned %d rows, want 1 and 0", rw.met(), n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneGroups(ctx, 100); err != nil || n != 1 {
		t.Fatalf("the next PruneGroups pruned %d rows (%v), want p's", n, err)
	}
	checkGroups(t, s)
}
