package faults_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
)

// poolerParams are what a store's URL needs behind PgBouncer in
// transaction mode (docs/faults.md).
const poolerParams = "&default_query_exec_mode=exec&readpast_listen=off"

// groupStatesSQL reads every group that has a row or running jobs, with
// the start times of its running jobs, in one snapshot (as the postgres
// package's own conformance test does).
const groupStatesSQL = `
SELECT coalesce(g.group_key, j.group_key), g.group_key IS NOT NULL,
       coalesce(g.running, 0), coalesce(g.max_running, 1),
       coalesce(array_agg(j.started_at) FILTER (WHERE j.id IS NOT NULL), '{}')
FROM readpast_groups g
FULL JOIN (SELECT id, group_key, started_at FROM readpast_jobs
           WHERE state = 'running' AND group_key IS NOT NULL) j
  ON j.group_key = g.group_key
GROUP BY 1, 2, 3, 4`

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

// TestConformanceThroughPgBouncer is scenario 4's first half: the whole
// conformance suite on a store whose every connection goes through
// PgBouncer in transaction pooling mode (Debian's pgbouncer, started here
// on 127.0.0.1 and a free port). Consecutive transactions of one client
// connection land on different server connections, so anything that
// relies on session state (named prepared statements, LISTEN, session
// advisory locks, SET) fails here.
func TestConformanceThroughPgBouncer(t *testing.T) {
	srv := pgtest.ServerFor(t, pgtest.Options{})
	bouncer := pgtest.PgBouncerFor(t, srv)
	ctx := context.Background()
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) readpast.Store {
			name := newDatabase(t, srv)
			s, err := postgres.Open(ctx, bouncer.URL(name)+poolerParams)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Migrate(ctx); err != nil {
				s.Close()
				t.Fatal(err)
			}
			return s
		},
		StressJobs: 5000,
		Claimers:   16,
		Groups:     groupStates,
		BeginSQLTx: func(t *testing.T, st readpast.Store) *sql.Tx {
			// readpast_listen is readpast's own parameter: not for database/sql.
			cs := strings.ReplaceAll(st.(*postgres.Store).Pool().Config().ConnString(), "&readpast_listen=off", "")
			db, err := sql.Open("pgx", cs)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx
		},
	})
}

// TestWorkersThroughPgBouncer is scenario 4's second half: the enqueuer
// and three Go worker processes reach PostgreSQL only through PgBouncer in
// transaction mode, with readpast_listen=off (they poll), while a worker
// is killed every 1-3 s. Beyond the history's verdict: no call may fail
// (no prepared-statement or protocol error), and no server session may
// have run LISTEN (counted by pg_stat_statements: through the pooler a
// LISTEN fails nowhere, its notifications just go to whichever client the
// session serves next, so only the server can tell).
func TestWorkersThroughPgBouncer(t *testing.T) {
	srv := pgtest.ServerFor(t, pgtest.Options{Settings: []string{"shared_preload_libraries=pg_stat_statements"}})
	bouncer := pgtest.PgBouncerFor(t, srv)
	name := newDatabase(t, srv)
	direct := openPG(t, srv.URL(name))
	ctx := context.Background()
	if _, err := direct.Pool().Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	url := bouncer.URL(name) + poolerParams
	s := openPG(t, url)
	r := newRun(t, "pgbouncer-workers", s, pgNow(s))
	res := killWorkers(t, r, goWorker("postgres", url), 10, loadFor(12*time.Second))
	if n, first := errorsMatching(res.events, ""); n > 0 {
		t.Errorf("%d calls failed through the pooler, the first: %s", n, first)
	}
	var listens, claims int64
	if err := direct.Pool().QueryRow(ctx, `SELECT coalesce(sum(calls) FILTER (WHERE query ILIKE 'LISTEN%'), 0),
		coalesce(sum(calls) FILTER (WHERE query LIKE '%readpast_claim_order%' OR query ILIKE '%FOR UPDATE SKIP LOCKED%'), 0)
		FROM pg_stat_statements`).Scan(&listens, &claims); err != nil {
		t.Fatal(err)
	}
	t.Logf("pg_stat_statements: %d LISTEN, %d statements with SKIP LOCKED", listens, claims)
	if listens != 0 || claims == 0 {
		t.Errorf("the server ran LISTEN %d times (want 0) and %d claim-like statements (want some)", listens, claims)
	}
}
