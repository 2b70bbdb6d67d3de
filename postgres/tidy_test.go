package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// churn enqueues, claims and completes n jobs: each leaves two dead rows
// in the live table (the claim's old version and the finished row).
func churn(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	ctx := context.Background()
	for n > 0 {
		k := min(n, 1000)
		ps := make([]readpast.EnqueueParams, k)
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "k"}
		}
		if _, err := s.Enqueue(ctx, ps); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: k, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cs := make([]readpast.Completion, len(jobs))
		for i, j := range jobs {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
}

// deadRows waits until the statistics (flushed by each backend about once
// a second) report at least min dead rows in the live table, and returns
// them.
func deadRows(t *testing.T, s *postgres.Store, atLeast int64) int64 {
	t.Helper()
	return deadRowsOf(t, s, "readpast_jobs", atLeast)
}

// deadRowsOf is deadRows of table.
func deadRowsOf(t *testing.T, s *postgres.Store, table string, atLeast int64) int64 {
	t.Helper()
	var dead int64
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := s.Pool().QueryRow(context.Background(),
			"SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass", table).Scan(&dead); err != nil {
			t.Fatal(err)
		}
		if dead >= atLeast || time.Now().After(deadline) {
			return dead
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tidyStore opens a store whose live table autovacuum leaves alone: on a
// server shared by many test databases its workers come by at any moment
// and would race Tidy for the dead rows.
func tidyStore(t *testing.T) *postgres.Store {
	t.Helper()
	s := newStore(t)
	t.Cleanup(func() { s.Close() })
	if _, err := s.Pool().Exec(context.Background(), "ALTER TABLE readpast_jobs SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// churnAndTidy finishes n jobs, waits until the statistics show their 2n
// dead rows, and checks that Tidy then vacuums the live table.
func churnAndTidy(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	churn(t, s, n)
	if dead := deadRows(t, s, int64(2*n)); dead < int64(2*n) {
		t.Fatalf("the statistics show %d dead rows after %d finished jobs", dead, n)
	}
	if got, err := s.Tidy(context.Background()); err != nil || got != 1 {
		t.Fatalf("Tidy = %d, %v; want the live table vacuumed", got, err)
	}
}

// TestTidyVacuumsTheLiveTable: once dead rows outnumber live ones, Tidy
// vacuums the live table, then leaves it alone for a while; when a
// snapshot held open elsewhere keeps the dead rows, it backs off.
func TestTidyVacuumsTheLiveTable(t *testing.T) {
	ctx := context.Background()
	s := tidyStore(t)
	churnAndTidy(t, s, 4000)
	if dead := deadRows(t, s, 0); dead > 400 {
		t.Errorf("%d dead rows left after the vacuum", dead)
	}
	if w := postgres.TidyWait(s, "readpast_jobs"); w != 5*time.Second {
		t.Errorf("next vacuum after %v, want 5s", w)
	}
	vacuumed := time.Now()

	// A snapshot held open from here on keeps every row that dies after
	// it: the next vacuum reclaims nothing, and the wait doubles.
	defer holdSnapshot(ctx, t, s.Pool().Config().ConnString()).Close(ctx)
	churn(t, s, 4000)
	deadRows(t, s, 4000)
	if n, err := s.Tidy(ctx); err != nil || n != 0 {
		t.Errorf("Tidy right after a vacuum = %d, %v; want nothing", n, err)
	}
	time.Sleep(time.Until(vacuumed.Add(5 * time.Second))) // the previous vacuum's interval
	if n, err := s.Tidy(ctx); err != nil || n != 1 {
		t.Fatalf("Tidy with a snapshot held = %d, %v; want a vacuum", n, err)
	}
	if w := postgres.TidyWait(s, "readpast_jobs"); w != 10*time.Second {
		t.Errorf("next vacuum after %v, want 10s: the vacuum reclaimed nothing", w)
	}
}

// TestTidyKeepsPaceWithABusyTable: rows that die while the live table is
// vacuumed may leave it due again at the end; the vacuum still reclaimed
// most of what it found, and the next one comes after the usual interval,
// not twice that.
func TestTidyKeepsPaceWithABusyTable(t *testing.T) {
	ctx := context.Background()
	s := tidyStore(t)
	// A first vacuum, of a quiet table: the next may come 5 s later.
	churnAndTidy(t, s, 4000)
	vacuumed := time.Now()
	churn(t, s, 4000)
	if dead := deadRows(t, s, 8000); dead < 8000 {
		t.Fatalf("the statistics show %d dead rows after 4000 more finished jobs", dead)
	}
	time.Sleep(time.Until(vacuumed.Add(5 * time.Second)))
	busy := false
	postgres.OnVacuum(s, func(table string) {
		if table == "readpast_jobs" {
			// As if 1,200 jobs finished while the vacuum ran: 2,400 dead
			// rows, enough to make the table due again.
			churn(t, s, 1200)
			if dead := deadRows(t, s, 2400); dead < 2000 {
				t.Errorf("the statistics show %d dead rows after 1200 finished jobs: the table is not due", dead)
			}
			busy = true
		}
	})
	if n, err := s.Tidy(ctx); err != nil || n != 1 {
		t.Fatalf("Tidy = %d, %v; want the live table vacuumed", n, err)
	}
	if !busy {
		t.Fatal("the second vacuum did not run")
	}
	if w := postgres.TidyWait(s, "readpast_jobs"); w != 5*time.Second {
		t.Errorf("next vacuum after %v, want 5s: the vacuum reclaimed 8000 dead rows", w)
	}
}

// TestTidyVacuumsTheMarksSooner: the ready marks are vacuumed once their
// dead rows number an eighth of their live ones, though far fewer than
// them, and not before; a second later again, or two when some snapshot
// keeps the rows; and a store leaves them alone when another process has
// just vacuumed them.
func TestTidyVacuumsTheMarksSooner(t *testing.T) {
	ctx := context.Background()
	s := tidyStore(t)
	if _, err := s.Pool().Exec(ctx, "ALTER TABLE readpast_group_ready SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	// 40,000 groups of one job each: a mark each.
	ps := make([]readpast.EnqueueParams, 40000)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: fmt.Sprint("g", i)}
	}
	for i := 0; i < len(ps); i += 5000 {
		if _, err := s.Enqueue(ctx, ps[i:i+5000]); err != nil {
			t.Fatal(err)
		}
	}
	var vacuumed []string
	postgres.OnVacuum(s, func(table string) { vacuumed = append(vacuumed, table) })
	// claim takes n jobs, using up n marks, and waits until the
	// statistics show dead marks in all.
	claim := func(n int, dead int64) {
		t.Helper()
		for ; n > 0; n -= 1000 {
			if got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1000, Lease: time.Hour}); err != nil || len(got) != 1000 {
				t.Fatalf("claimed %d jobs, %v; want 1000", len(got), err)
			}
		}
		if got := deadRowsOf(t, s, "readpast_group_ready", dead); got < dead {
			t.Fatalf("the statistics show %d dead marks, want %d", got, dead)
		}
	}
	tidy := func(want ...string) {
		t.Helper()
		vacuumed = nil
		if n, err := s.Tidy(ctx); err != nil || n != len(want) || fmt.Sprint(vacuumed) != fmt.Sprint(want) {
			t.Fatalf("Tidy = %d, %v, vacuumed %v; want %v vacuumed", n, err, vacuumed, want)
		}
	}

	// 4,000 dead marks, 36,000 live: under an eighth.
	claim(4000, 4000)
	tidy()
	// 6,000 dead, 34,000 live: over an eighth.
	claim(2000, 6000)
	began := time.Now()
	tidy("readpast_group_ready")
	if dead := deadRowsOf(t, s, "readpast_group_ready", 0); dead > 300 {
		t.Errorf("%d dead marks left after the vacuum", dead)
	}
	if w := postgres.TidyWait(s, "readpast_group_ready"); w != time.Second {
		t.Errorf("next vacuum of the marks after %v, want 1s", w)
	}

	// A snapshot held open from here on keeps the marks that die after
	// it: the next vacuum reclaims nothing, and the wait doubles.
	defer holdSnapshot(ctx, t, s.Pool().Config().ConnString()).Close(ctx)
	claim(5000, 5000) // 5,000 dead, 29,000 live
	time.Sleep(time.Until(began.Add(time.Second)))
	tidy("readpast_group_ready")
	if w := postgres.TidyWait(s, "readpast_group_ready"); w != 2*time.Second {
		t.Errorf("next vacuum of the marks after %v, want 2s: the vacuum reclaimed nothing", w)
	}
	// The marks are still due, but another process that tidies now
	// leaves them alone: this one has just vacuumed them.
	other, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if n, err := other.Tidy(ctx); err != nil || n != 0 {
		t.Errorf("another store's Tidy right after the vacuum = %d, %v; want nothing", n, err)
	}
}

// TestTidyNeedsOwnership: a store whose role does not own the tables does
// nothing, and says so once.
func TestTidyNeedsOwnership(t *testing.T) {
	ctx := context.Background()
	owner := newStore(t)
	t.Cleanup(func() { owner.Close() })
	role := fmt.Sprintf("tidy_other_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		// Roles belong to the whole server, which may be given by URL.
		for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := owner.Pool().Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO " + role,
	} {
		if _, err := owner.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(owner.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	other, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := other.Tidy(ctx); err == nil || !errors.Is(err, postgres.ErrNotOwner) {
		t.Fatalf("Tidy as another role: %v, want ErrNotOwner", err)
	}
	if n, err := other.Tidy(ctx); n != 0 || err != nil {
		t.Fatalf("Tidy again: %d, %v; want nothing, silently", n, err)
	}
}

// TestVacuumNeverTruncates: no vacuum of a readpast table cuts off the
// empty pages at its end, because doing so holds an ACCESS EXCLUSIVE lock
// that claims and writes would wait on (migrations/0007). Every readpast
// table carries vacuum_truncate = false, and a drained live table keeps
// its size through Tidy's vacuum and a plain VACUUM; VACUUM (TRUNCATE)
// still gives the pages back when asked.
func TestVacuumNeverTruncates(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	var truncating []string
	if err := s.Pool().QueryRow(ctx, `
SELECT coalesce(array_agg(relname ORDER BY relname), '{}') FROM pg_class
WHERE relname LIKE 'readpast%' AND relkind = 'r' AND relnamespace = current_schema()::regnamespace
  AND NOT coalesce('vacuum_truncate=false' = ANY (reloptions), false)`).Scan(&truncating); err != nil {
		t.Fatal(err)
	}
	if len(truncating) > 0 {
		t.Errorf("tables a vacuum may truncate: %v", truncating)
	}

	churn(t, s, 5000)
	size := func() int64 {
		t.Helper()
		var n int64
		if err := s.Pool().QueryRow(ctx, "SELECT pg_relation_size('readpast_jobs')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	if before == 0 {
		t.Fatal("the live table is empty before the vacuum: nothing to truncate")
	}
	if _, err := s.Tidy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM readpast_jobs"); err != nil {
		t.Fatal(err)
	}
	if after := size(); after != before {
		t.Fatalf("the drained live table went from %d to %d bytes in a vacuum: it was truncated", before, after)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM (TRUNCATE) readpast_jobs"); err != nil {
		t.Fatal(err)
	}
	if after := size(); after >= before {
		t.Fatalf("VACUUM (TRUNCATE) left the drained live table at %d bytes (from %d)", after, before)
	}
}
