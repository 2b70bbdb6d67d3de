package dashboard

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// testStore is what the browser test needs of a store: both stores
// implement it.
type testStore interface {
	readpast.Store
	readpast.Inspector
}

// backend is a database the browser test runs `readpast serve` on, with
// the test's own connection to it, to seed it and check it after each
// action.
type backend struct {
	name string
	st   testStore
	// url is serve's --database-url.
	url string
	// addHistory inserts finished jobs, with ids from the store's
	// sequence.
	addHistory func(t *testing.T, rows []historyRow)
	// ids returns, newest first, the ids of the jobs, live or finished,
	// that match an SQL condition.
	ids func(t *testing.T, where string) []int64
}

// historyRow is a finished job the test puts in the history directly, to
// give the charts an hour of traffic without running it.
type historyRow struct {
	queue, kind, worker, state string
	payload, result            []byte
	errors                     []readpast.AttemptError
	runAt, started, finished   time.Time
}

// postgresBackend is a fresh database on the test's PostgreSQL server.
func postgresBackend(t *testing.T) *backend {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return &backend{
		name: "postgres", st: st, url: url,
		addHistory: func(t *testing.T, rows []historyRow) {
			t.Helper()
			b := &pgx.Batch{}
			for _, r := range rows {
				errs, err := json.Marshal(r.errors)
				if err != nil {
					t.Fatal(err)
				}
				b.Queue(`INSERT INTO readpast_jobs_history
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
     worker, group_key, created_at, started_at, finished_at, errors, result)
VALUES (nextval('readpast_job_id_seq'), $1, $2, $3::jsonb, 0, $4, $5, 1, 25, gen_random_uuid(),
        $6, NULL, $4, $7, $8, $9::jsonb, $10::jsonb)`,
					r.queue, r.kind, string(r.payload), r.runAt, r.state, r.worker, r.started, r.finished, string(errs), nullText(r.result))
			}
			if err := st.Pool().SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
		},
		ids: func(t *testing.T, where string) []int64 {
			t.Helper()
			rows, err := st.Pool().Query(ctx, `SELECT id FROM readpast_jobs WHERE `+where+
				` UNION ALL SELECT id FROM readpast_jobs_history WHERE `+where+` ORDER BY id DESC`)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				t.Fatal(err)
			}
			return ids
		},
	}
}

// sqliteBackend is a fresh SQLite file, which the test and the server
// open both.
func sqliteBackend(t *testing.T) *backend {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "readpast.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	micros := func(tm time.Time) int64 { return tm.UnixMicro() }
	return &backend{
		name: "sqlite", st: st, url: path,
		addHistory: func(t *testing.T, rows []historyRow) {
			t.Helper()
			err := inTx(ctx, st.DB(), func(tx *sql.Tx) error {
				// Ids come from readpast_jobs' AUTOINCREMENT sequence:
				// take them from it, and move it on past them.
				var last int64
				if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'readpast_jobs'`).Scan(&last); err != nil {
					return fmt.Errorf("sequence: %w", err)
				}
				for _, r := range rows {
					last++
					errs, err := json.Marshal(r.errors)
					if err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, `INSERT INTO readpast_history
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
     worker, group_key, created_at, started_at, finished_at, errors, result)
VALUES (?, ?, ?, ?, 0, ?, ?, 1, 25, ?, ?, NULL, ?, ?, ?, ?, ?)`,
						last, r.queue, r.kind, string(r.payload), micros(r.runAt), r.state, fmt.Sprintf("token-%d", last),
						r.worker, micros(r.runAt), micros(r.started), micros(r.finished), string(errs), nullText(r.result)); err != nil {
						return fmt.Errorf("history row: %w", err)
					}
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM sqlite_sequence WHERE name = 'readpast_jobs'`); err != nil {
					return fmt.Errorf("sequence: %w", err)
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) VALUES ('readpast_jobs', ?)`, last); err != nil {
					return fmt.Errorf("sequence: %w", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		},
		ids: func(t *testing.T, where string) []int64 {
			t.Helper()
			rows, err := st.DB().QueryContext(ctx, `SELECT id FROM readpast_jobs WHERE `+where+
				` UNION ALL SELECT id FROM readpast_history WHERE `+where+` ORDER BY id DESC`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var ids []int64
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return ids
		},
	}
}

func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// nullText is b as text, or NULL when empty.
func nullText(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// hourOfHistory makes an hour of finished jobs in four queues, ending now:
// more traffic in some minutes, failures in a burst, the wait before a
// start rising and falling.
func hourOfHistory(now time.Time) []historyRow {
	queues := []string{"mail", "images", "reports", "billing"}
	kinds := []string{"email", "resize", "render", "invoice"}
	var rows []historyRow
	for i := 1; i <= 2400; i++ {
		if i%3 == 0 && (i/100)%4 == 1 {
			continue // quieter minutes
		}
		m := i * 59 / 2400
		started := now.Add(-59 * time.Minute).Add(time.Duration(float64(59*time.Minute) * float64(i) / 2400))
		wait := time.Duration((20 + 30*(1+math.Sin(float64(m)/9)) + float64((i%11)*(1+m/10))) * float64(time.Millisecond))
		state := "succeeded"
		if (m >= 38 && m <= 44 && i%7 == 0) || i%97 == 0 {
			state = "failed"
		}
		worker := fmt.Sprintf("worker-%d", i%4)
		r := historyRow{
			queue: queues[i%4], kind: kinds[i%4], worker: worker, state: state,
			payload: fmt.Appendf(nil, `{"order":%d}`, i),
			runAt:   started.Add(-wait), started: started, finished: started.Add(40 * time.Millisecond),
		}
		if state == "failed" {
			r.errors = []readpast.AttemptError{{Attempt: 1, At: started, Message: "upstream timed out", Worker: worker}}
		} else {
			r.result = []byte(`{"ok":true}`)
		}
		rows = append(rows, r)
	}
	return rows
}
