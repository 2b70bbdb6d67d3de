// Package pgharness is the PostgreSQL side of a storetest.Harness: what
// the conformance suite reads from a postgres.Store's own tables. The
// postgres package's conformance run and the fault suite's run through
// PgBouncer share it.
package pgharness

import (
	"context"
	"database/sql"
	"net/url"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
)

// Open opens a store on url and migrates it, failing t on an error. The
// caller closes it (storetest closes the stores a Harness's New makes).
func Open(t testing.TB, url string) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

// Harness returns a storetest.Harness with Groups, TagRows and BeginSQLTx
// set for stores that are *postgres.Store; the caller sets New and the
// sizes (and Deadlocks, where the server's counter can be trusted).
func Harness() storetest.Harness {
	return storetest.Harness{Groups: GroupStates, TagRows: TagRows, BeginSQLTx: BeginSQLTx}
}

// groupStatesSQL reads every group (key) that has a row or running jobs,
// with the start times of the running jobs that name it (as their group or
// a later key), in one snapshot. A key's counter is its row's running
// count less the freed-slot counts not yet folded into it
// (readpast_key_freed, postgres/migrations/0022).
const groupStatesSQL = `
SELECT coalesce(g.group_key, j.group_key), g.group_key IS NOT NULL,
       coalesce(g.running, 0) - coalesce((SELECT sum(f.n) FROM readpast_key_freed f
                                          WHERE f.group_key = g.group_key), 0)::int,
       coalesce(g.max_running, 1),
       coalesce(array_agg(j.started_at) FILTER (WHERE j.id IS NOT NULL), '{}')
FROM readpast_groups g
FULL JOIN (SELECT r.id, k.key AS group_key, r.started_at
           FROM readpast_jobs r
           CROSS JOIN LATERAL unnest(r.group_key || coalesce(r.more_keys, '{}')) AS k(key)
           WHERE r.state = 'running' AND r.group_key IS NOT NULL) j
  ON j.group_key = g.group_key
GROUP BY 1, 2, 3, 4`

// GroupStates is storetest.Harness.Groups for PostgreSQL.
func GroupStates(ctx context.Context, st readpast.Store) ([]storetest.GroupState, error) {
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

// TagRows is storetest.Harness.TagRows for PostgreSQL.
func TagRows(ctx context.Context, st readpast.Store) (n int64, err error) {
	err = st.(*postgres.Store).Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_job_tags").Scan(&n)
	return n, err
}

// BeginSQLTx is storetest.Harness.BeginSQLTx for PostgreSQL: a
// database/sql transaction on the store's database, through the same
// server or pooler. readpast's own URL parameter (readpast_listen) is
// left out: it is not one for database/sql.
func BeginSQLTx(t *testing.T, st readpast.Store) *sql.Tx {
	u, err := url.Parse(st.(*postgres.Store).Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("readpast_listen")
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}
