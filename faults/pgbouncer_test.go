package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

// poolerParams are what a store's URL needs behind PgBouncer in
// transaction mode (docs/faults.md).
const poolerParams = "&default_query_exec_mode=exec&readpast_listen=off"

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
	watch := pgtest.WatchSplits(t, fmt.Sprintf("127.0.0.1:%d", bouncer.Port()))
	t.Cleanup(func() {
		for q, n := range countSplits(watch.Splits()) {
			t.Errorf("bound %d times outside the transaction or round trip that parsed it (behind the pooler it may reach another server session): %s", n, q)
		}
		if watch.Groups() == 0 {
			t.Error("no statement passed the split watch")
		}
	})
	h := pgharness.Harness()
	h.New = func(t *testing.T) readpast.Store {
		u, err := watch.URL(bouncer.URL(newDatabase(t, srv)))
		if err != nil {
			t.Fatal(err)
		}
		return pgharness.Open(t, u+poolerParams)
	}
	h.StressJobs, h.Claimers = 5000, 16
	storetest.Run(t, h)
}

// countSplits counts the statements the watch saw bound outside the
// span that parsed them, by their first line.
func countSplits(splits []string) map[string]int {
	n := map[string]int{}
	for _, q := range splits {
		q, _, _ = strings.Cut(q, "\n")
		n[q]++
	}
	return n
}

// TestWorkersThroughPgBouncer is scenario 4's second half: the enqueuer
// and three Go worker processes reach PostgreSQL only through PgBouncer in
// transaction mode, with readpast_listen=off (they poll), while a worker
// is killed every 1-3 s. Beyond the history's verdict: no call may fail
// (no prepared-statement or protocol error; a write refused for a stale
// token is fencing, not a failure), and no server session may
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
	// A write refused for a stale token is fencing at work (a lease ran
	// out while the loaded machine delayed its worker), not the pooler.
	var failed, stale int
	var first string
	for _, e := range res.events {
		switch {
		case e.Err == "":
		case strings.Contains(e.Err, readpast.ErrStaleToken.Error()):
			stale++
		default:
			if failed == 0 {
				first = e.Err
			}
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d calls failed through the pooler, the first: %s", failed, first)
	}
	t.Logf("%d writes refused for a stale token", stale)
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
