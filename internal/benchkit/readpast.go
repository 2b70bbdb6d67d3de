package benchkit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// Readpast is readpast on one of its stores, worked by a readpast.Client.
type Readpast struct {
	name  string
	store readpast.Store
	// reset empties the tables; history inserts finished jobs.
	reset   func(context.Context) error
	history func(context.Context, int) error
	// analyze refreshes the planner's statistics (nil on SQLite).
	analyze func(context.Context) error
	// url is the PostgreSQL URL, for HoldSnapshot ("" on SQLite).
	url string
}

var (
	_ System      = (*Readpast)(nil)
	_ Snapshotter = (*Readpast)(nil)
	_ Grouper     = (*Readpast)(nil)
	_ Pauser      = (*Readpast)(nil)
	_ Analyzer    = (*Readpast)(nil)
)

// ReadpastPostgres opens readpast on the PostgreSQL database at url and
// migrates it.
func ReadpastPostgres(ctx context.Context, url string) (*Readpast, error) {
	s, err := postgres.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return &Readpast{
		name:  "readpast/postgres",
		store: s,
		url:   url,
		reset: func(ctx context.Context) error {
			return execAll(ctx, s.Pool(),
				// TRUNCATE fires no DELETE trigger: the counts go too.
				"TRUNCATE readpast_jobs, readpast_jobs_history, readpast_groups, readpast_group_ready, readpast_queues, "+
					"readpast_counts, readpast_count_deltas, readpast_unique_keys, readpast_schedules, readpast_schedule_runs, readpast_job_tags, "+
					"readpast_key_freed",
				"VACUUM ANALYZE readpast_jobs, readpast_jobs_history, readpast_groups, readpast_group_ready, readpast_queues, "+
					"readpast_counts, readpast_count_deltas, readpast_unique_keys, readpast_schedules, readpast_schedule_runs, readpast_job_tags, "+
					"readpast_key_freed")
		},
		history: func(ctx context.Context, n int) error {
			if _, err := s.Pool().Exec(ctx, historySQLPostgres, n); err != nil {
				return err
			}
			// As River's side does after its own: without the VACUUM, the
			// insert-driven autovacuum of millions of fresh rows runs
			// during the drain that follows, and the scenario measures it.
			_, err := s.Pool().Exec(ctx, "VACUUM ANALYZE readpast_jobs_history")
			return err
		},
		analyze: func(ctx context.Context) error {
			_, err := s.Pool().Exec(ctx, "ANALYZE readpast_jobs")
			return err
		},
	}, nil
}

// historySQLPostgres inserts $1 succeeded jobs with ids past the live
// sequence, finished over the last day.
const historySQLPostgres = `
INSERT INTO readpast_jobs_history
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
     worker, group_key, created_at, started_at, finished_at, errors, result)
SELECT nextval('readpast_job_id_seq'), 'default', 'bench', '{}', 0, t, 'succeeded', 1, 25,
       gen_random_uuid(), 'bench', NULL, t, t, t, '[]', NULL
FROM (SELECT now() - interval '1 day' + i * interval '1 millisecond' AS t
      FROM generate_series(1, $1) AS i) s`

// execAll runs each statement on its own (VACUUM cannot run inside the
// implicit transaction of a multi-statement string).
func execAll(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, stmts ...string) error {
	for _, q := range stmts {
		if _, err := db.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// ReadpastSQLite opens readpast on the SQLite file at path.
func ReadpastSQLite(ctx context.Context, path string) (*Readpast, error) {
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	return &Readpast{
		name:  "readpast/sqlite",
		store: s,
		reset: func(ctx context.Context) error {
			_, err := s.DB().ExecContext(ctx, `DELETE FROM readpast_jobs; DELETE FROM readpast_history;
				DELETE FROM readpast_groups; DELETE FROM readpast_group_ready; DELETE FROM readpast_queues;
				DELETE FROM readpast_job_tags`)
			return err
		},
		history: func(ctx context.Context, n int) error {
			_, err := s.DB().ExecContext(ctx, historySQLSQLite, n)
			return err
		},
	}, nil
}

// historySQLSQLite inserts ?1 succeeded jobs with ids past the live ones,
// and moves the id sequence past them.
const historySQLSQLite = `
WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1),
base(b) AS (SELECT coalesce((SELECT max(id) FROM readpast_jobs), 0) + coalesce((SELECT max(id) FROM readpast_history), 0) + 1)
INSERT INTO readpast_history (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts,
    token, lease_expires_at, worker, group_key, created_at, started_at, errors, finished_at, result)
SELECT b + n, 'default', 'bench', '{}', 0, t, 'succeeded', 1, 25, 'bench', NULL, 'bench', NULL, t, t, '[]', t, NULL
FROM i, base, (SELECT CAST((unixepoch('subsec') - 86400) * 1000000 AS INTEGER) AS t);
UPDATE sqlite_sequence SET seq = (SELECT max(id) FROM readpast_history) WHERE name = 'readpast_jobs'`

// Store is the readpast store under test.
func (r *Readpast) Store() readpast.Store { return r.store }

// Close closes the store.
func (r *Readpast) Close() error { return r.store.Close() }

// Name implements System.
func (r *Readpast) Name() string { return r.name }

// Reset implements System.
func (r *Readpast) Reset(ctx context.Context) error { return r.reset(ctx) }

// Enqueue implements System.
func (r *Readpast) Enqueue(ctx context.Context, n int) error {
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "bench"}
	}
	_, err := r.store.Enqueue(ctx, ps)
	return err
}

// EnqueueGrouped implements Grouper.
func (r *Readpast) EnqueueGrouped(ctx context.Context, g string, n int) error {
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "bench", Group: g}
	}
	_, err := r.store.Enqueue(ctx, ps)
	return err
}

// Backlog implements System.
func (r *Readpast) Backlog(ctx context.Context, n int) error {
	later := time.Now().Add(365 * 24 * time.Hour)
	for n > 0 {
		ps := make([]readpast.EnqueueParams, min(n, 5000))
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "bench", RunAt: later}
		}
		if _, err := r.store.Enqueue(ctx, ps); err != nil {
			return err
		}
		n -= len(ps)
	}
	return nil
}

// PausedQueues implements Pauser.
func (r *Readpast) PausedQueues(ctx context.Context, n, jobs int) error {
	ps := make([]readpast.EnqueueParams, 0, n*jobs)
	for i := range n {
		q := fmt.Sprint("paused-", i)
		if err := r.store.PauseQueue(ctx, q); err != nil {
			return err
		}
		for range jobs {
			ps = append(ps, readpast.EnqueueParams{Kind: "bench", Queue: q})
		}
	}
	for len(ps) > 0 {
		k := min(len(ps), 5000)
		if _, err := r.store.Enqueue(ctx, ps[:k]); err != nil {
			return err
		}
		ps = ps[k:]
	}
	return nil
}

// History implements System.
func (r *Readpast) History(ctx context.Context, n int) error { return r.history(ctx, n) }

// Depth implements System: the pending jobs of every queue, from Stats.
func (r *Readpast) Depth(ctx context.Context) (int64, error) {
	st, err := r.store.Stats(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, q := range st {
		if q.State == readpast.StatePending {
			n += q.Count
		}
	}
	return n, nil
}

// Start implements System with a readpast.Client of one queue.
func (r *Readpast) Start(ctx context.Context, workers, fetch int, jobTime time.Duration, done func(enqueued, started time.Time)) (func(context.Context) error, error) {
	w := readpast.NewWorkers()
	w.Handle("bench", func(ctx context.Context, job *readpast.Job) (any, error) {
		started := time.Now()
		if jobTime > 0 {
			time.Sleep(jobTime)
		}
		done(job.CreatedAt, started)
		return nil, nil
	}, nil)
	q := readpast.QueueConfig{MaxWorkers: workers, FetchLimit: fetch}
	c, err := readpast.NewClient(r.store, readpast.Config{Workers: w, Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: q}})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c.Stop, nil
}

// Analyze implements Analyzer: ANALYZE of the live jobs on PostgreSQL,
// nothing on SQLite.
func (r *Readpast) Analyze(ctx context.Context) error {
	if r.analyze == nil {
		return nil
	}
	return r.analyze(ctx)
}

// HoldSnapshot implements Snapshotter on PostgreSQL.
func (r *Readpast) HoldSnapshot(ctx context.Context) (func(), error) {
	if r.url == "" {
		return nil, fmt.Errorf("%s: %w", r.name, ErrNotApplicable)
	}
	return HoldSnapshot(ctx, r.url)
}

// HoldSnapshot opens a session on the PostgreSQL database at url that
// stays idle in a repeatable-read transaction, holding its snapshot (and
// so every dead row vacuum would otherwise reclaim), until release.
func HoldSnapshot(ctx context.Context, url string) (release func(), err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err == nil {
		_, err = tx.Exec(ctx, "SELECT count(*) FROM pg_class")
	}
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return func() {
		tx.Rollback(context.Background())
		conn.Close(context.Background())
	}, nil
}
