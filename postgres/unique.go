package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// rowSource runs statements on a pgx pool, connection or transaction, or
// on a database/sql transaction (EnqueueSQLTx).
type rowSource interface {
	query(ctx context.Context, sql string, args ...any) (rowIter, error)
	exec(ctx context.Context, sql string, args ...any) error
}

// rowIter is what pgx.Rows and *sql.Rows have in common.
type rowIter interface {
	jobRows
	Close()
}

type pgxSource struct{ q querier }

func (s pgxSource) query(ctx context.Context, sql string, args ...any) (rowIter, error) {
	return s.q.Query(ctx, sql, args...)
}

func (s pgxSource) exec(ctx context.Context, sql string, args ...any) error {
	_, err := s.q.Exec(ctx, sql, args...)
	return err
}

type sqlSource struct{ tx *sql.Tx }

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func (s sqlSource) query(ctx context.Context, q string, args ...any) (rowIter, error) {
	rows, err := s.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (s sqlSource) exec(ctx context.Context, q string, args ...any) error {
	_, err := s.tx.ExecContext(ctx, q, args...)
	return err
}

// anyKey reports whether a job of the batch has a unique key.
func anyKey(jobs []readpast.EnqueueParams) bool {
	for _, p := range jobs {
		if p.UniqueKey != "" {
			return true
		}
	}
	return false
}

// oneKeyOnly reports whether every job of the batch has the same unique
// key: the first settles it, the others are its duplicates.
func oneKeyOnly(jobs []readpast.EnqueueParams) bool {
	for _, p := range jobs {
		if p.UniqueKey == "" || p.UniqueKey != jobs[0].UniqueKey {
			return false
		}
	}
	return len(jobs) > 0
}

// enqueueKeyedOp is enqueueKeyed with its errors named and classified
// (opErr), except validation errors, which are returned as they are.
func enqueueKeyedOp(ctx context.Context, src rowSource, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	out, err := enqueueKeyed(ctx, src, jobs)
	if err != nil && !errors.Is(err, readpast.ErrInvalid) {
		return nil, opErr("enqueue", err)
	}
	return out, err
}

// keyRounds bounds how often enqueueKeyed sends entries whose key changed
// hands between its statements.
const keyRounds = 8

// enqueueKeyed enqueues a batch with unique keys on src, which must be a
// transaction: all or none. Each entry settles on its own: a new job, or
// the job that holds its key (Duplicate set). The first entry of a key
// goes to sql/enqueue_unique.sql; later entries of the same key are
// duplicates of whatever holds it after the first. An entry the statement
// could not settle from its snapshot (the key's row was committed after
// it, or no longer holds the key) is sent again in a new statement, with
// a new snapshot, after the rows that no longer hold their keys are
// deleted (sql/unique_stale.sql). The unique index decides every time;
// the snapshot only says who the holder is. New jobs get ids in input
// order, except that an entry settled in a later round gets a later id.
func enqueueKeyed(ctx context.Context, src rowSource, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	first := storekit.FirstKeys(jobs)
	var send []int
	for i, f := range first {
		if f == i || f < 0 {
			send = append(send, i)
		}
	}
	// Validate everything before anything is sent.
	if _, err := newEnqueueCols(jobs, nil); err != nil {
		return nil, err
	}
	out := make([]*readpast.Job, len(jobs))
	for round := 0; len(send) > 0; round++ {
		if round == keyRounds {
			return nil, fmt.Errorf("enqueue: unique key %q changed hands %d times while it was being settled", jobs[send[0]].UniqueKey, keyRounds)
		}
		part := make([]readpast.EnqueueParams, len(send))
		for k, i := range send {
			part[k] = jobs[i]
		}
		cols, err := newEnqueueCols(part, send)
		if err != nil {
			return nil, err
		}
		rows, err := src.query(ctx, enqueueUniqueSQL, cols.keyedArgs()...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				ord     int64
				outcome string
			)
			j, err := scanJobAfter(rows, &ord, &outcome)
			if err != nil {
				rows.Close()
				return nil, err
			}
			j.Duplicate = outcome == "duplicate"
			if !j.Duplicate {
				j.Traceparent, j.Tracestate = cols.traceContext(int(ord - 1))
			}
			out[send[ord-1]] = j
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
		var again []int
		var keys []string
		for _, i := range send {
			if out[i] == nil {
				again = append(again, i)
				keys = append(keys, jobs[i].UniqueKey)
			}
		}
		if len(again) > 0 {
			if err := src.exec(ctx, uniqueStaleSQL, keys); err != nil {
				return nil, err
			}
		}
		send = again
	}
	storekit.SettleKeyRepeats(out, first)
	return out, nil
}
