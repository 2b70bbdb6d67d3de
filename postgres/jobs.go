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

// actedOn collects the (id, token) rows a Complete or Fail statement
// returns for the entries that acted: the token each job acted under, by
// id (a statement acts on a job once at most: one row per id).
func actedOn(rows pgx.Rows, err error) (map[int64]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[int64]string{}
	for rows.Next() {
		var id int64
		var token string
		if err := rows.Scan(&id, &token); err != nil {
			return nil, err
		}
		set[id] = token
	}
	return set, rows.Err()
}

// completedOn is actedOn for the completion statement, which also says
// whether any job it completed was a flow's parent.
func completedOn(rows pgx.Rows, err error) (map[int64]string, bool, error) {
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	set := map[int64]string{}
	parents := false
	for rows.Next() {
		var id int64
		var token string
		var parent bool
		if err := rows.Scan(&id, &token, &parent); err != nil {
			return nil, false, err
		}
		set[id] = token
		parents = parents || parent
	}
	return set, parents, rows.Err()
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
