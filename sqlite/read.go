package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/cursor"
	"github.com/readpast/readpast/internal/storekit"
)

// Get returns a live or finished job; readpast.ErrNotFound when no job has
// that id.
func (s *Store) Get(ctx context.Context, id int64) (*readpast.Job, error) {
	var job *readpast.Job
	err := s.readOp(ctx, "get", func(db *sql.DB) error {
		var err error
		job, err = scanJob(db.QueryRowContext(ctx, getSQL, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
		}
		return err
	})
	return job, err
}

// List returns the jobs matching p, live and finished together, newest
// (highest id) first.
func (s *Store) List(ctx context.Context, p readpast.ListParams) (readpast.ListResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.ListResult{}, err
	}
	before := storekit.PageBelow(p)
	var res readpast.ListResult
	err = s.readOp(ctx, "list", func(db *sql.DB) error {
		res = readpast.ListResult{Jobs: make([]*readpast.Job, 0, min(p.Limit, 64))}
		var rows *sql.Rows
		var err error
		if p.Tag != "" {
			rows, err = db.QueryContext(ctx, listTagSQL, before, p.Queue, string(p.State), p.Kind, p.Group, p.Limit+1, p.Tag)
		} else {
			rows, err = db.QueryContext(ctx, listSQL, before, p.Queue, string(p.State), p.Kind, p.Group, p.Limit+1)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			res.Jobs = append(res.Jobs, j)
		}
		return rows.Err()
	})
	if err != nil {
		return readpast.ListResult{}, err
	}
	if len(res.Jobs) > p.Limit {
		res.Jobs = res.Jobs[:p.Limit]
		res.Next = cursor.Encode(res.Jobs[p.Limit-1].ID)
	}
	return res, nil
}

// Stats counts jobs per queue and state across the live and history
// tables, ordered by queue, then state in lifecycle order
// (storekit.SortStats). An empty database gives an empty, non-nil slice.
func (s *Store) Stats(ctx context.Context) ([]readpast.QueueStats, error) {
	var out []readpast.QueueStats
	err := s.readOp(ctx, "stats", func(db *sql.DB) error {
		out = []readpast.QueueStats{}
		rows, err := db.QueryContext(ctx, statsSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st readpast.QueueStats
			if err := rows.Scan(&st.Queue, &st.State, &st.Count); err != nil {
				return err
			}
			out = append(out, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	storekit.SortStats(out)
	return out, nil
}
