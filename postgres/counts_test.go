package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// statsMap reads Stats as "queue/state" to count.
func statsMap(t *testing.T, s readpast.Store) map[string]int64 {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, x := range st {
		out[x.Queue+"/"+string(x.State)] = x.Count
	}
	return out
}

// exactCounts counts the rows themselves, as "queue/state" to count.
func exactCounts(t *testing.T, s *postgres.Store) map[string]int64 {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT queue, state, count(*) FROM readpast_jobs GROUP BY 1, 2
		UNION ALL SELECT queue, state, count(*) FROM readpast_jobs_history GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var q, st string
		var n int64
		if err := rows.Scan(&q, &st, &n); err != nil {
			t.Fatal(err)
		}
		out[q+"/"+st] += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFoldNeverMakesWritersWait: a fold held open in its transaction (its
// deltas deleted, its counts rows updated) makes no enqueue, claim,
// completion or Stats wait, and a second fold folds nothing instead of
// waiting.
func TestFoldNeverMakesWritersWait(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k", Queue: "other"}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var folded int
	if err := tx.QueryRow(ctx, postgres.FoldCountsSQL, 1000).Scan(&folded); err != nil || folded == 0 {
		t.Fatalf("fold in a transaction: %d, %v", folded, err)
	}
	within(t, "enqueue, claim, complete and Stats", 2*time.Second, async(func() error {
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k", Queue: "other"}}); err != nil {
			return err
		}
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{"default", "other"}, Limit: 10, Lease: time.Minute})
		if err != nil {
			return err
		}
		if _, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil {
			return err
		}
		_, err = s.Stats(ctx)
		return err
	}))
	within(t, "a second fold", 2*time.Second, async(func() error { return s.FoldCounts(ctx) }))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := statsMap(t, s), exactCounts(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the folds: Stats = %v, rows say %v", got, want)
	}
}

// TestCountsMigration: a database at schema 3 with jobs in every state
// gets counts that match its rows when migrated to schema 5.
func TestCountsMigration(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k", Queue: "b"}, {Kind: "k", Queue: "b"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{"b"}, Limit: 2, Lease: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatal(got, err)
	}
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"DROP TABLE readpast_counts, readpast_count_deltas",
		"DROP FUNCTION readpast_count_changes CASCADE", // and its triggers
		// Schema 6 (tags, snoozes) goes too: it is applied again after 5.
		"DROP TABLE readpast_job_tags",
		"ALTER TABLE readpast_jobs DROP COLUMN tags, DROP COLUMN snoozes",
		"ALTER TABLE readpast_jobs_history DROP COLUMN tags, DROP COLUMN snoozes",
		// Schema 8 (the group rows' announce trigger) goes too.
		"DROP FUNCTION readpast_announce_groups CASCADE",
		// Schema 11 (limits) goes too.
		"DROP TABLE readpast_limits",
		"DROP FUNCTION readpast_key_limit",
		"ALTER TABLE readpast_groups DROP COLUMN limit_key, DROP COLUMN interval_us, DROP COLUMN burst, DROP COLUMN tat",
		// Schema 12 (turns) goes too.
		"ALTER TABLE readpast_groups DROP COLUMN served_at",
		"DROP FUNCTION readpast_turn",
		// Schema 13 (weights) goes too (readpast_limits went above).
		"ALTER TABLE readpast_groups DROP COLUMN weight",
		// Schema 19 (jobs taken in a key's turn) goes too.
		"ALTER TABLE readpast_groups DROP COLUMN turn_used",
		// Schema 20 (limits resolved for many keys at once) goes too.
		"DROP FUNCTION readpast_key_limits",
		// Schema 21 (jobs with several keys) goes too.
		"ALTER TABLE readpast_jobs DROP COLUMN more_keys",
		"ALTER TABLE readpast_jobs_history DROP COLUMN more_keys",
		"ALTER TABLE readpast_groups DROP COLUMN waiters",
		"DROP FUNCTION readpast_fit_keys",
		// Schema 22 (freed slots of keys without a bound) goes too.
		"DROP TABLE readpast_key_freed",
		// And schema 25 (keys with room).
		"DROP FUNCTION readpast_keys_with_room",
		"DELETE FROM readpast_schema WHERE version >= 5",
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := statsMap(t, s), exactCounts(t, s); fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 3 {
		t.Fatalf("after migration 4: Stats = %v, rows say %v", got, want)
	}
}
