package pgtest

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSplitWatch: a statement sent in describe_exec outside a transaction
// is recorded, the same statement inside one is not, and exec mode's
// single round trip is not.
func TestSplitWatch(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	w := WatchSplits(t, u.Host)
	proxied, err := w.URL(withExec(t, u.String()))
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, proxied)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 1 /* exec */").Scan(&n); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT 2 /* in a transaction */", pgx.QueryExecModeDescribeExec).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := w.Splits(); len(s) != 0 {
		t.Fatalf("splits %q, want none", s)
	}
	if err := conn.QueryRow(ctx, "SELECT 3 /* split */", pgx.QueryExecModeDescribeExec).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if s := w.Splits(); len(s) != 1 || !strings.Contains(s[0], "split") {
		t.Fatalf("splits %q, want the describe_exec statement outside a transaction", s)
	}
	if w.Groups() < 4 {
		t.Fatalf("%d groups checked, want at least 4", w.Groups())
	}
}

// withExec is u in pgx's exec mode, which sends each statement in one
// round trip.
func withExec(t *testing.T, u string) string {
	t.Helper()
	s, err := WithParams(u, "default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
