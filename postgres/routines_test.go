package postgres_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
)

// liveTables are the tables the hot-path routines read and write.
var liveTables = []string{"readpast_jobs", "readpast_group_ready", "readpast_groups",
	"readpast_unique_keys", "readpast_queues", "readpast_jobs_history", "readpast_job_tags"}

// xactReads is what the current transaction has read from readpast's
// tables: sequential scans, and rows fetched by index scans.
type xactReads struct {
	seqScans, idxFetched int64
	detail               string
}

// minus is r less what was read before (pg_stat_xact_user_tables also
// counts earlier transactions of the session whose counts were not yet
// reported).
func (r xactReads) minus(before xactReads) xactReads {
	return xactReads{r.seqScans - before.seqScans, r.idxFetched - before.idxFetched, r.detail + " (less " + before.detail + ")"}
}

func readsOf(ctx context.Context, t *testing.T, tx pgx.Tx) xactReads {
	t.Helper()
	var r xactReads
	err := tx.QueryRow(ctx, `
SELECT coalesce(sum(seq_scan), 0), coalesce(sum(idx_tup_fetch), 0),
       coalesce(string_agg(format('%s: %s seq, %s by index', relname, seq_scan, idx_tup_fetch), '; ' ORDER BY relname), '')
FROM pg_stat_xact_user_tables
WHERE relname LIKE 'readpast%' AND (seq_scan > 0 OR idx_tup_fetch > 0)`).Scan(&r.seqScans, &r.idxFetched, &r.detail)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// querier is a session or a transaction the routines are called on.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// callClaim calls the claim routine on q for up to limit jobs of queue
// and returns the ids claimed. Given a start in claim order (priority,
// run_at), the claim starts there (postgres/claimfrom.go); without one, at
// the head.
func callClaim(ctx context.Context, t *testing.T, q querier, queue string, limit int, from ...any) []int64 {
	t.Helper()
	if from == nil {
		from = []any{nil, nil}
	}
	args := append([]any{[]string{queue}, "w", int64(limit), time.Minute.Microseconds(), uuid.NewString()}, from...)
	rows, err := q.Query(ctx, postgres.ClaimCall, args...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := vals[0].(int64); ok { // not the row of keys' next starts (id NULL)
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// callComplete calls the completion routine on q for ids (in id order)
// with their tokens and returns how many completed.
func callComplete(ctx context.Context, t *testing.T, q querier, ids []int64, toks []string) int {
	t.Helper()
	rows, err := q.Query(ctx, postgres.CompleteCall, ids, toks, make([]*string, len(ids)), false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRoutinePlansSurviveGrowth: the claim and completion routines are
// planned once per server session (routines.go), so a plan made while the
// tables were empty is still the plan once they hold tens of thousands of
// rows. It must still read only the rows it needs: no sequential scan,
// and a few rows per job by index. A plan that walks a whole index or
// table (the generic claim plan made on an empty table once did: 346 ms a
// claim) reads tens of thousands here.
//
// Autovacuum is off on the tables for the test, and nothing analyzes
// them, so no statistics change invalidates the plans between the empty
// tables and the full ones.
func TestRoutinePlansSurviveGrowth(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	for _, tbl := range liveTables {
		// The statements are fixed names from liveTables, not input.
		if _, err := s.Pool().Exec(ctx, "ALTER TABLE "+tbl+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE "+tbl); err != nil {
			t.Fatal(err)
		}
	}

	// One server session, whose plans are made on the empty tables.
	session, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	claim := func(tx pgx.Tx, queue string, limit int, from ...any) []int64 {
		t.Helper()
		return callClaim(ctx, t, tx, queue, limit, from...)
	}
	// A position before every job: the claim that starts after it takes
	// what one from the head would.
	start := []any{int32(-1000), time.Unix(0, 0)}
	tokens := func(tx pgx.Tx, ids []int64) []string {
		t.Helper()
		var toks []string
		if err := tx.QueryRow(ctx, "SELECT array_agg(token::text ORDER BY id) FROM readpast_jobs WHERE id = ANY($1)", ids).Scan(&toks); err != nil {
			t.Fatal(err)
		}
		return toks
	}
	complete := func(tx pgx.Tx, ids []int64, toks []string) int {
		t.Helper()
		return callComplete(ctx, t, tx, ids, toks)
	}
	inTx := func(f func(tx pgx.Tx)) {
		t.Helper()
		tx, err := session.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		f(tx)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The claim routine plans each of its three statements when it first
	// runs it (sql/routines/claim.sql): the ungrouped one for a queue
	// without a ready group, from the head or after a position, and the
	// whole claim for one with. One grouped job, whose mark sends the
	// claim of "g" down the last, makes all three plans here, on tables
	// as good as empty.
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "g", Group: "seed"}}); err != nil {
		t.Fatal(err)
	}
	inTx(func(tx pgx.Tx) {
		if ids := claim(tx, "u", 10); len(ids) != 0 {
			t.Fatalf("claimed %v from an empty queue", ids)
		}
		if ids := claim(tx, "u", 10, start...); len(ids) != 0 {
			t.Fatalf("claimed %v from an empty queue, after a position", ids)
		}
		if ids := claim(tx, "g", 10); len(ids) != 1 {
			t.Fatalf("claimed %v from a queue of one grouped job", ids)
		}
		if n := complete(tx, []int64{1}, []string{uuid.NewString()}); n != 0 {
			t.Fatalf("completed %d on empty tables", n)
		}
	})

	// The tables grow: 30,000 ungrouped jobs behind 2,000 with unique
	// keys, 20,000 grouped jobs in 10,000 groups (as many ready marks),
	// 20,000 rows of other groups.
	enqueue := func(n int, p func(i int) readpast.EnqueueParams) {
		t.Helper()
		for base := 0; base < n; base += 2000 {
			ps := make([]readpast.EnqueueParams, 0, 2000)
			for i := base; i < n && i < base+2000; i++ {
				ps = append(ps, p(i))
			}
			if _, err := s.Enqueue(ctx, ps); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(30000, func(int) readpast.EnqueueParams { return readpast.EnqueueParams{Kind: "k", Queue: "u"} })
	enqueue(2000, func(i int) readpast.EnqueueParams {
		return readpast.EnqueueParams{Kind: "k", Queue: "u", Priority: -1, UniqueKey: fmt.Sprint("key-", i)}
	})
	enqueue(20000, func(i int) readpast.EnqueueParams {
		return readpast.EnqueueParams{Kind: "k", Queue: "g", Group: fmt.Sprint("g-", i%10000)}
	})
	if _, err := s.Pool().Exec(ctx, `INSERT INTO readpast_groups (group_key, running, max_running)
		SELECT 'other-' || i, 0, 2 FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}

	const most = 1000 // rows fetched by index for 10 or 20 jobs; a walk of any grown table fetches 20,000 or more
	check := func(what string, r xactReads) {
		t.Helper()
		t.Logf("%s: %s", what, r.detail)
		if r.seqScans > 0 || r.idxFetched > most {
			t.Errorf("%s on the grown tables, with the plan made on empty ones: %d sequential scans, %d rows fetched by index (%s); want none and at most %d",
				what, r.seqScans, r.idxFetched, r.detail, most)
		}
	}
	var ungrouped, grouped []int64
	inTx(func(tx pgx.Tx) {
		before := readsOf(ctx, t, tx)
		ungrouped = claim(tx, "u", 10)
		check("claim of ungrouped jobs", readsOf(ctx, t, tx).minus(before))
	})
	inTx(func(tx pgx.Tx) {
		before := readsOf(ctx, t, tx)
		more := claim(tx, "u", 10, start...)
		check("claim of ungrouped jobs after a position", readsOf(ctx, t, tx).minus(before))
		ungrouped = append(ungrouped, more...)
	})
	inTx(func(tx pgx.Tx) {
		before := readsOf(ctx, t, tx)
		grouped = claim(tx, "g", 10)
		check("claim of grouped jobs", readsOf(ctx, t, tx).minus(before))
	})
	if len(ungrouped) != 20 || len(grouped) != 10 {
		t.Fatalf("claimed %d ungrouped and %d grouped jobs, want 20 and 10", len(ungrouped), len(grouped))
	}
	ids := append(append([]int64{}, ungrouped...), grouped...)
	inTx(func(tx pgx.Tx) {
		toks := tokens(tx, ids)
		before := readsOf(ctx, t, tx)
		if n := complete(tx, ids, toks); n != len(ids) {
			t.Fatalf("completed %d of %d", n, len(ids))
		}
		check("completion of 10 ungrouped jobs with unique keys and 10 grouped ones", readsOf(ctx, t, tx).minus(before))
	})
}

// TestMissingRoutinesAreDefined: a database migrated by another build of
// readpast lacks this build's routines (their names carry a digest of
// their text); Claim and Complete define them on first use instead of
// failing, and Migrate defines them too.
func TestMissingRoutinesAreDefined(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	dropRoutines := func() {
		t.Helper()
		for _, name := range postgres.RoutineNames() {
			// The names are this build's constants, not input.
			if _, err := s.Pool().Exec(ctx, "DROP FUNCTION "+name); err != nil {
				t.Fatal(err)
			}
		}
	}
	dropRoutines()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	jobs := mustClaim(t, s, "w", 1)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	dropRoutines()
	errs, err := s.Complete(ctx, completions(jobs))
	if err != nil || errs[0] != nil {
		t.Fatalf("complete without the routine: %v %v", err, errs)
	}
	dropRoutines()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range postgres.RoutineNames() {
		var ok bool
		if err := s.Pool().QueryRow(ctx, "SELECT to_regproc($1) IS NOT NULL", name).Scan(&ok); err != nil || !ok {
			t.Errorf("after Migrate, routine %s defined: %v %v", name, ok, err)
		}
	}
}

// TestRoutinesNeverJIT: the routines run with the JIT off (routines.go).
// Their generic plans are costed for whole tables, so with a large
// backlog in the statistics their estimates pass jit_above_cost, and a
// JIT-compiled claim took 65-80 ms instead of about 1 ms. Here the
// session's jit_above_cost is 0, so any statement planned with the JIT on
// is compiled, and auto_explain sends every plan, nested ones included,
// to the test: none of the routines' statements may show JIT. A statement
// of the test's own must, or the test could not see it.
func TestRoutinesNeverJIT(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	var ps []readpast.EnqueueParams
	for i := range 10 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: "u", UniqueKey: fmt.Sprint("key-", i)},
			readpast.EnqueueParams{Kind: "k", Queue: "g", Group: fmt.Sprint("g-", i)})
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgx.ParseConfig(s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	taken := func() []string {
		mu.Lock()
		defer mu.Unlock()
		p := plans
		plans = nil
		return p
	}
	session, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	cannot := func(why string) {
		t.Helper()
		if pgtest.InCI() {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	var jit bool
	if err := session.QueryRow(ctx, "SELECT pg_jit_available()").Scan(&jit); err != nil {
		t.Fatal(err)
	}
	if !jit {
		cannot("this PostgreSQL server has no JIT (built without LLVM): nothing to test")
	}
	if _, err := session.Exec(ctx, "LOAD 'auto_explain'"); err != nil {
		cannot(fmt.Sprintf("auto_explain cannot be loaded (the test needs a superuser): %v", err))
	}
	for _, set := range []string{
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET jit_above_cost = 0",
		"SET client_min_messages = log",
	} {
		if _, err := session.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := session.Exec(ctx, "SELECT sum(i) FROM generate_series(1, 10) i"); err != nil {
		t.Fatal(err)
	}
	if control := taken(); len(control) == 0 || !strings.Contains(strings.Join(control, "\n"), "JIT:") {
		t.Fatalf("the test's own statement was not shown JIT-compiled, so the test cannot see compiling: %q", control)
	}

	// The calls themselves ("SELECT * FROM readpast_claim_…(…)") are the
	// test's statements, planned with the session's settings; what they
	// run is what must not be compiled.
	nested := func(what string) {
		t.Helper()
		n := 0
		for _, p := range taken() {
			if strings.Contains(p, "Function Scan on readpast_") {
				continue
			}
			n++
			if strings.Contains(p, "JIT:") {
				t.Errorf("%s: a statement of the routine was JIT-compiled:\n%s", what, p)
			}
		}
		if n == 0 {
			t.Fatalf("%s: no plan of the routine's statements was shown", what)
		}
	}
	var ids []int64
	for _, c := range []struct {
		what, queue string
		limit       int
		from        []any
	}{
		{"claim of queue u", "u", 5, nil},
		{"claim of queue u after a position", "u", 5, []any{int32(-1000), time.Unix(0, 0)}},
		{"claim of queue g", "g", 10, nil},
	} {
		claimed := callClaim(ctx, t, session, c.queue, c.limit, c.from...)
		if len(claimed) == 0 {
			t.Fatalf("%s: claimed nothing", c.what)
		}
		ids = append(ids, claimed...)
		nested(c.what)
	}
	slices.SortFunc(ids, cmp.Compare) // a completion's jobs are sent in id order
	var toks []string
	if err := session.QueryRow(ctx, "SELECT array_agg(token::text ORDER BY id) FROM readpast_jobs WHERE id = ANY($1)", ids).Scan(&toks); err != nil {
		t.Fatal(err)
	}
	taken()
	if done := callComplete(ctx, t, session, ids, toks); done != len(ids) {
		t.Fatalf("completed %d of %d", done, len(ids))
	}
	nested("completion")
}
