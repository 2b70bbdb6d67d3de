package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// advGateFunction shadows pg_catalog.hashtext for the sessions whose
// search_path puts readpast_adv_gate before pg_catalog: while the gate
// (advisory lock 4242, 1) is held, it waits before hashing. The claim's
// pause keys are pg_try_advisory_xact_lock_shared(1919181685,
// hashtext(name)) (sql/claim_queues.sql), so a claim on such a store stops
// after its statement began and before it asks for the pause key: the
// window between the claim call's snapshot and its pause keys. No
// production statement is changed; the shadow only holds the claim where
// the scheduler could hold it anyway.
const advGateFunction = `
CREATE SCHEMA IF NOT EXISTS readpast_adv_gate;
CREATE OR REPLACE FUNCTION readpast_adv_gate.hashtext(t text) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF current_setting('readpast.adv_gate', true) = 'on' THEN
        PERFORM pg_advisory_lock_shared(4242, 1);
        PERFORM pg_advisory_unlock_shared(4242, 1);
    END IF;
    RETURN pg_catalog.hashtext(t);
END $$`

// gatedStore opens a second store (another process, in effect) on base's
// database whose claims stop before taking their pause keys while gate
// holds lock (4242, 1), with the given session settings.
func gatedStore(t *testing.T, base *postgres.Store, settings map[string]string) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if _, err := base.Pool().Exec(ctx, advGateFunction); err != nil {
		t.Fatal(err)
	}
	cs := base.Pool().Config().ConnString()
	gate, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock(4242, 1)"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cs)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "readpast_adv_gate,pg_catalog,public")
	q.Set("readpast.adv_gate", "on")
	for k, v := range settings {
		q.Set(k, v)
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	store, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = gate.Exec(context.Background(), "SELECT pg_advisory_unlock_all()")
		gate.Close(context.Background())
		store.Close()
	})
	return store, gate
}

// waitGateBlocked returns once a session waits for the gate (4242, 1).
func waitGateBlocked(t *testing.T, base *postgres.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := base.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid = 4242 AND objid = 1 AND objsubid = 2`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no claim reached the gate")
}

// TestPauseBetweenClaimSnapshotAndPauseKey: a claim of queue p in
// another process has begun (its call's snapshot is taken) but has not yet
// asked for p's pause key; PauseQueue(p) commits and returns meanwhile (it
// waits for nobody: nobody holds the key); then the claim asks for the key,
// gets it, and reads the pause. Under READ COMMITTED (PostgreSQL's default)
// the claim's statement takes a new snapshot after the key and sees the
// pause. Under REPEATABLE READ as the session's default
// (default_transaction_isolation, which an operator may set per database
// or role), every query of the routine reads the transaction's one
// snapshot, taken when the call began, before the pause committed: the
// claim saw p open and took p's job after PauseQueue returned. The claim
// routine now refuses to run outside READ COMMITTED, and the store then
// runs its claims in READ COMMITTED transactions of their own
// (claimiso.go).
func TestPauseBetweenClaimSnapshotAndPauseKey(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "p"}}); err != nil {
				t.Fatal(err)
			}
			other, gate := gatedStore(t, s, map[string]string{"default_transaction_isolation": iso})
			var got []*readpast.Job
			claimed := async(func() error {
				var err error
				got, err = other.Claim(ctx, readpast.ClaimParams{Queues: []string{"p"}, Worker: "other", Limit: 10, Lease: time.Minute})
				return err
			})
			waitGateBlocked(t, s)
			within(t, "PauseQueue while a claim has not yet asked for the key", 5*time.Second,
				async(func() error { return s.PauseQueue(ctx, "p") }))
			pausedAt := time.Now()
			if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock(4242, 1)"); err != nil {
				t.Fatal(err)
			}
			within(t, "the claim", 5*time.Second, claimed)
			for _, j := range got {
				t.Errorf("isolation %s: a claim that asked for p's pause key after PauseQueue(p) returned (at %v) took job %d of paused queue %s",
					iso, pausedAt.Format(time.StampMicro), j.ID, j.Queue)
			}
		})
	}
}
