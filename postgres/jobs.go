package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
)

var (
	_ readpast.GroupPruner = (*Store)(nil)
	_ readpast.SQLTxStore  = (*Store)(nil)
)

// querier runs statements on a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// jobRows is what pgx.Rows and *sql.Rows have in common for reading.
type jobRows interface {
	scanner
	Next() bool
	Err() error
}

// scanJobs reads every row of a job-returning statement.
func scanJobs(rows jobRows) ([]*readpast.Job, error) {
	var jobs []*readpast.Job
	var js jobScanner
	for rows.Next() {
		j, err := js.scan(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

func collectJobs(rows pgx.Rows) ([]*readpast.Job, error) {
	defer rows.Close()
	return scanJobs(rows)
}

// flaggedOn collects the rows a Complete or Fail statement returns for
// the entries that acted: the token each job acted under, by id (a
// statement acts on a job once at most: one row per id), and the n flags
// each row carries after them (sql/complete.sql: whether the job was a
// flow's parent, whether the statement freed a key's slot; sql/fail.sql:
// whether claimers should be woken). raised[k] reports whether some row
// set flag k.
func flaggedOn(rows pgx.Rows, err error, n int) (set map[int64]string, raised []bool, _ error) {
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	set, raised = map[int64]string{}, make([]bool, n)
	flags := make([]bool, n)
	var (
		id    int64
		token string
	)
	dest := []any{&id, &token}
	for k := range flags {
		dest = append(dest, &flags[k])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, err
		}
		set[id] = token
		for k, f := range flags {
			raised[k] = raised[k] || f
		}
	}
	return set, raised, rows.Err()
}

// retryDeadlock runs f again when PostgreSQL aborted it as a deadlock
// victim or a serialization failure; the statement had no effect then.
func retryDeadlock[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		var pgErr *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}
