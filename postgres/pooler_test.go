package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
)

// TestPoolerSettings: default_query_exec_mode=exec (or simple_protocol,
// cache_describe) moves the hot paths off describe_exec, whose second
// round trip may reach another server session behind a pooler, and
// readpast_listen=off is taken out of the URL (a pooler refuses unknown
// start-up parameters) and turns LISTEN off. The pooler itself is
// exercised by faults.TestConformanceThroughPgBouncer.
func TestPoolerSettings(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	for _, c := range []struct {
		params string
		mode   pgx.QueryExecMode
		listen bool
	}{
		{"", pgx.QueryExecModeDescribeExec, true},
		{"&default_query_exec_mode=cache_statement", pgx.QueryExecModeDescribeExec, true},
		{"&default_query_exec_mode=exec&readpast_listen=off", pgx.QueryExecModeExec, false},
		{"&default_query_exec_mode=simple_protocol&readpast_listen=on", pgx.QueryExecModeSimpleProtocol, true},
		{"&default_query_exec_mode=cache_describe", pgx.QueryExecModeCacheDescribe, true},
	} {
		s, err := postgres.Open(ctx, url+c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.params, err)
		}
		if postgres.HotMode(s) != c.mode || postgres.Listens(s) != c.listen {
			t.Errorf("%s: hot mode %v, listen %v; want %v, %v", c.params, postgres.HotMode(s), postgres.Listens(s), c.mode, c.listen)
		}
		if _, ok := s.Pool().Config().ConnConfig.RuntimeParams["readpast_listen"]; ok {
			t.Errorf("%s: readpast_listen left among the start-up parameters", c.params)
		}
		s.Close()
	}
	if _, err := postgres.Open(ctx, url+"&readpast_listen=maybe"); err == nil || !strings.Contains(err.Error(), "readpast_listen") {
		t.Fatalf("readpast_listen=maybe: %v", err)
	}
}
