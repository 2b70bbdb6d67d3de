package pgtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestDeadlocksQuotesTheServersReport makes the server break a deadlock
// between two transactions and checks that Deadlocks returns its report
// with both waits and the statements.
func TestDeadlocksQuotesTheServersReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := ServerFor(t, Options{Settings: []string{"deadlock_timeout=50ms"}})
	if srv == nil {
		return
	}
	url, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Deadlocks(); len(got) != 0 {
		t.Fatalf("reports before any deadlock: %q", got)
	}
	a, b := connect(t, ctx, url), connect(t, ctx, url)
	if _, err := a.Exec(ctx, `CREATE TABLE dl (id int PRIMARY KEY); INSERT INTO dl VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	// a locks row 1 and b row 2, each in a transaction left open.
	for id, conn := range []*pgx.Conn{a, b} {
		if _, err := conn.Exec(ctx, `BEGIN`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `UPDATE dl SET id = id WHERE id = $1`, id+1); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	go func() { _, err := a.Exec(ctx, `UPDATE dl SET id = id WHERE id = 2`); errs <- err }()
	go func() { _, err := b.Exec(ctx, `UPDATE dl SET id = id WHERE id = 1`); errs <- err }()
	broken := 0
	for range 2 {
		err := <-errs
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "40P01" {
			broken++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if broken != 1 {
		t.Fatalf("%d statements failed with a deadlock, want 1", broken)
	}
	var got []string
	for end := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got = srv.Deadlocks() // the log is written by another process
	}
	if len(got) != 1 {
		t.Fatalf("got %d reports, want 1: %q", len(got), got)
	}
	for _, want := range []string{"deadlock detected", "DETAIL:", "waits for ShareLock on transaction", "UPDATE dl SET id = id WHERE id = 1", "UPDATE dl SET id = id WHERE id = 2", "STATEMENT:"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("the report lacks %q:\n%s", want, got[0])
		}
	}
	t.Logf("report:\n%s", got[0])
}

func TestDeadlockReportsEndAtTheNextEntry(t *testing.T) {
	log := "2026-01-01 00:00:00.000 UTC [10] ERROR:  deadlock detected\n" +
		"2026-01-01 00:00:00.000 UTC [10] DETAIL:  Process 10 waits for ShareLock on transaction 5; blocked by process 11.\n" +
		"\tProcess 11 waits for ShareLock on transaction 6; blocked by process 10.\n" +
		"\tProcess 10: UPDATE a\n" +
		"2026-01-01 00:00:00.000 UTC [10] STATEMENT:  UPDATE a\n" +
		"2026-01-01 00:00:01.000 UTC [12] LOG:  checkpoint starting: time\n" +
		"2026-01-01 00:00:02.000 UTC [13] ERROR:  deadlock detected\n" +
		"2026-01-01 00:00:02.000 UTC [13] HINT:  See server log for query details.\n"
	got := deadlockReports([]byte(log))
	if len(got) != 2 || strings.Contains(got[0], "checkpoint") || !strings.Contains(got[0], "\tProcess 10: UPDATE a") ||
		!strings.HasSuffix(got[0], "STATEMENT:  UPDATE a") || !strings.Contains(got[1], "HINT:") {
		t.Fatalf("reports: %q", got)
	}
}
