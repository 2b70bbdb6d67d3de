package postgres_test

import (
	"context"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
)

// groupStatesSQL reads every group that has a row or running jobs, with
// the start times of its running jobs, in one snapshot.
const groupStatesSQL = `
SELECT coalesce(g.group_key, j.group_key), g.group_key IS NOT NULL,
       coalesce(g.running, 0), coalesce(g.max_running, 1),
       coalesce(array_agg(j.started_at) FILTER (WHERE j.id IS NOT NULL), '{}')
FROM readpast_groups g
FULL JOIN (SELECT id, group_key, started_at FROM readpast_jobs
           WHERE state = 'running' AND group_key IS NOT NULL) j
  ON j.group_key = g.group_key
GROUP BY 1, 2, 3, 4`

// groupStates is storetest.Harness.Groups for PostgreSQL.
func groupStates(ctx context.Context, st readpast.Store) ([]storetest.GroupState, error) {
	rows, err := st.(*postgres.Store).Pool().Query(ctx, groupStatesSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storetest.GroupState
	for rows.Next() {
		var g storetest.GroupState
		if err := rows.Scan(&g.Group, &g.Row, &g.Counter, &g.Limit, &g.Started); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// deadlocks is storetest.Harness.Deadlocks for PostgreSQL: the database's
// deadlock count, after closing the store's idle connections so that
// their backends report what they saw.
func deadlocks(ctx context.Context, st readpast.Store) (int64, error) {
	pool := st.(*postgres.Store).Pool()
	pool.Reset()
	time.Sleep(200 * time.Millisecond)
	var n int64
	err := pool.QueryRow(ctx, `SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database
		WHERE datname = current_database()`).Scan(nil, &n)
	return n, err
}
