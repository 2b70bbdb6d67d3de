package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/readpast/readpast/internal/benchkit"
)

// benchArgs is River's job: nothing but its kind.
type benchArgs struct{}

// Kind implements river.JobArgs.
func (benchArgs) Kind() string { return "bench" }

// benchWorker sleeps for the job time, then reports the job.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	jobTime time.Duration
	done    func(enqueued, started time.Time)
}

// Work implements river.Worker.
func (w *benchWorker) Work(ctx context.Context, job *river.Job[benchArgs]) error {
	started := time.Now()
	if w.jobTime > 0 {
		time.Sleep(w.jobTime)
	}
	w.done(job.CreatedAt, started)
	return nil
}

// riverSystem is River v0.51 on PostgreSQL, configured as River's own
// benchmark is: FetchCooldown 2 ms, FetchPollInterval 20 ms, the default
// pgx pool.
type riverSystem struct {
	url    string
	pool   *pgxpool.Pool
	insert *river.Client[pgx.Tx]
}

var (
	_ benchkit.System       = (*riverSystem)(nil)
	_ benchkit.Snapshotter  = (*riverSystem)(nil)
	_ benchkit.BulkInserter = (*riverSystem)(nil)
)

func openRiver(ctx context.Context, url string) (*riverSystem, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	insert, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &riverSystem{url: url, pool: pool, insert: insert}, nil
}

func (r *riverSystem) Close() { r.pool.Close() }

// Name implements benchkit.System.
func (r *riverSystem) Name() string { return "river" }

// Reset implements benchkit.System.
func (r *riverSystem) Reset(ctx context.Context) error {
	if _, err := r.pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return err
	}
	_, err := r.pool.Exec(ctx, "VACUUM ANALYZE river_job")
	return err
}

func params(n int, opts *river.InsertOpts) []river.InsertManyParams {
	ps := make([]river.InsertManyParams, n)
	for i := range ps {
		ps[i] = river.InsertManyParams{Args: benchArgs{}, InsertOpts: opts}
	}
	return ps
}

// Analyze implements benchkit.Analyzer.
func (r *riverSystem) Analyze(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, "ANALYZE river_job")
	return err
}

// Enqueue implements benchkit.System.
func (r *riverSystem) Enqueue(ctx context.Context, n int) error {
	if n == 1 {
		_, err := r.insert.Insert(ctx, benchArgs{}, nil)
		return err
	}
	_, err := r.insert.InsertMany(ctx, params(n, nil))
	return err
}

// InsertMany implements benchkit.BulkInserter with River's COPY path.
func (r *riverSystem) InsertMany(ctx context.Context, n int) error {
	_, err := r.insert.InsertManyFast(ctx, params(n, nil))
	return err
}

// Backlog implements benchkit.System.
func (r *riverSystem) Backlog(ctx context.Context, n int) error {
	opts := &river.InsertOpts{ScheduledAt: time.Now().Add(365 * 24 * time.Hour)}
	for n > 0 {
		k := min(n, 5000)
		if _, err := r.insert.InsertManyFast(ctx, params(k, opts)); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// History implements benchkit.System: completed jobs, finalized over the
// last day.
func (r *riverSystem) History(ctx context.Context, n int) error {
	_, err := r.pool.Exec(ctx, `
INSERT INTO river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
                       priority, args, attempted_by, errors, kind, metadata, queue, tags)
SELECT 'completed', 1, 25, t, t, t, t, 1, '{}', '{bench}', '{}', 'bench', '{}', 'default', '{}'
FROM (SELECT now() - interval '1 day' + i * interval '1 millisecond' AS t FROM generate_series(1, $1) AS i) s`, n)
	if err != nil {
		return err
	}
	_, err = r.pool.Exec(ctx, "ANALYZE river_job")
	return err
}

// Depth implements benchkit.System: counts per state, as River UI's
// queue overview reads them.
func (r *riverSystem) Depth(ctx context.Context) (int64, error) {
	rows, err := r.pool.Query(ctx, "SELECT state, count(*) FROM river_job GROUP BY state")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		var state string
		var c int64
		if err := rows.Scan(&state, &c); err != nil {
			return 0, err
		}
		if state == "available" || state == "scheduled" || state == "retryable" {
			n += c
		}
	}
	return n, rows.Err()
}

// Start implements benchkit.System.
func (r *riverSystem) Start(ctx context.Context, workers, fetch int, jobTime time.Duration, done func(enqueued, started time.Time)) (func(context.Context) error, error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, &benchWorker{jobTime: jobTime, done: done})
	c, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c.Stop, nil
}

// HoldSnapshot implements benchkit.Snapshotter.
func (r *riverSystem) HoldSnapshot(ctx context.Context) (func(), error) {
	return benchkit.HoldSnapshot(ctx, r.url)
}
