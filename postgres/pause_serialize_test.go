package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast/postgres"
)

// Adversarial tests of the pause (sql/pause_queue.sql) in sessions whose
// default isolation is stricter than READ COMMITTED.

// storeWith opens another store (another process, in effect) on base's
// database with the given session settings in its URL.
func storeWith(t *testing.T, base *postgres.Store, settings map[string]string) *postgres.Store {
	t.Helper()
	u, err := url.Parse(base.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range settings {
		q.Set(k, v)
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	s, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPausesRacingUnderRepeatableRead: "every store
// statement that can wait is retried inside the store when PostgreSQL
// reports a serialization failure (40001), so neither reaches a caller"
// (architecture.md, lock order). PauseQueue waits, for the pause key, and
// in a session whose default isolation is REPEATABLE READ its statement's
// snapshot is taken before that wait: when another pause of the same
// queue commits meanwhile (two operators, or a deploy script run twice),
// its INSERT ... ON CONFLICT DO UPDATE meets a row it cannot see, and the
// 40001 reaches the caller, although the queue is paused. A claim in
// flight (here a session holding the queue's pause key in shared mode, as
// a claim does until it commits) keeps both pauses waiting. Under READ
// COMMITTED (the control case) both return nil.
func TestPausesRacingUnderRepeatableRead(t *testing.T) {
	for _, iso := range []string{"read committed", "repeatable read"} {
		t.Run(iso, func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			claim, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			defer claim.Close(ctx)
			tx, err := claim.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT pg_try_advisory_xact_lock_shared(1919181685, hashtext('p'))"); err != nil {
				t.Fatal(err)
			}
			one := storeWith(t, s, map[string]string{"default_transaction_isolation": iso})
			two := storeWith(t, s, map[string]string{"default_transaction_isolation": iso})
			first := async(func() error { return one.PauseQueue(ctx, "p") })
			second := async(func() error { return two.PauseQueue(ctx, "p") })
			for deadline := time.Now().Add(10 * time.Second); ; {
				var n int
				if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
					WHERE locktype = 'advisory' AND NOT granted AND classid = 1919181685`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d pauses wait for the key, want 2", n)
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := tx.Commit(ctx); err != nil { // the claim in flight ends
				t.Fatal(err)
			}
			for i, ch := range []<-chan error{first, second} {
				select {
				case err := <-ch:
					if err != nil {
						t.Errorf("isolation %s: PauseQueue %d: %v", iso, i+1, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("PauseQueue %d did not return", i+1)
				}
			}
			var paused bool
			if err := s.Pool().QueryRow(ctx, "SELECT paused_at IS NOT NULL FROM readpast_queues WHERE name = 'p'").Scan(&paused); err != nil {
				t.Fatal(err)
			}
			if !paused {
				t.Error("queue p is not paused")
			}
		})
	}
}
