package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
)

// TestPoolerSettings: default_query_exec_mode=exec (or simple_protocol,
// cache_describe) moves the hot paths off describe_exec, whose second
// round trip may reach another server session behind a pooler, and
// readpast_listen=off is taken out of the URL (a pooler refuses unknown
// start-up parameters) and turns LISTEN off. The pooler itself is
// exercised by faults.TestConformanceThroughPgBouncer.
//
// The routines' calls (claim, completion) are prepared statements only
// under cache_statement, pgx's default, which no transaction-mode pooler
// setting uses: the test claims and completes a job on a pool of one
// connection and counts that session's prepared statements.
func TestPoolerSettings(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	for _, c := range []struct {
		params   string
		mode     pgx.QueryExecMode
		listen   bool
		prepared int // the routines' calls among the session's prepared statements
	}{
		{"", pgx.QueryExecModeDescribeExec, true, 2},
		{"&default_query_exec_mode=cache_statement", pgx.QueryExecModeDescribeExec, true, 2},
		{"&default_query_exec_mode=exec&readpast_listen=off", pgx.QueryExecModeExec, false, 0},
		{"&default_query_exec_mode=simple_protocol&readpast_listen=on", pgx.QueryExecModeSimpleProtocol, true, 0},
		{"&default_query_exec_mode=cache_describe", pgx.QueryExecModeCacheDescribe, true, 0},
		{"&default_query_exec_mode=describe_exec", pgx.QueryExecModeDescribeExec, true, 0},
	} {
		u, err := pgtest.WithParams(url, c.params+"&pool_max_conns=1")
		if err != nil {
			t.Fatal(err)
		}
		s, err := postgres.Open(ctx, u)
		if err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		if postgres.HotMode(s) != c.mode || postgres.Listens(s) != c.listen {
			t.Errorf("%s: hot mode %v, listen %v; want %v, %v", c.params, postgres.HotMode(s), postgres.Listens(s), c.mode, c.listen)
		}
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "pooler"}}); err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		jobs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"pooler"}, Worker: "w", Limit: 1, Lease: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%s: claimed %d jobs: %v", c.params, len(jobs), err)
		}
		if errs, err := s.Complete(ctx, []readpast.Completion{{ID: jobs[0].ID, Token: jobs[0].Token}}); err != nil || errs[0] != nil {
			t.Fatalf("%s: complete: %v %v", c.params, err, errs)
		}
		var prepared int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
			WHERE statement LIKE '%readpast\_claim\_%' OR statement LIKE '%readpast\_complete\_%'`,
			pgx.QueryExecModeSimpleProtocol).Scan(&prepared); err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		if prepared != c.prepared {
			t.Errorf("%s: %d of the routines' calls prepared in the session, want %d", c.params, prepared, c.prepared)
		}
		if _, ok := s.Pool().Config().ConnConfig.RuntimeParams["readpast_listen"]; ok {
			t.Errorf("%s: readpast_listen left among the start-up parameters", c.params)
		}
		s.Close()
	}
	maybe, err := pgtest.WithParams(url, "readpast_listen=maybe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, maybe); err == nil || !strings.Contains(err.Error(), "readpast_listen") {
		t.Fatalf("readpast_listen=maybe: %v", err)
	}
}
