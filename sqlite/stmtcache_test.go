package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// openCached opens a pool of one connection on a new database file with
// a table t(x INTEGER PRIMARY KEY) holding 1, 2 and 3.
func openCached(t *testing.T) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := openDB(dsn(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2), (3)"); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// kept returns the texts of the statements db's connection keeps.
func kept(t *testing.T, db *sql.DB) map[string]bool {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	texts := map[string]bool{}
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(*cachingConn)
		if !ok {
			return fmt.Errorf("connection is a %T, not a cachingConn", dc)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for q := range c.stmts {
			texts[q] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return texts
}

func TestStmtCacheKeepsAStatementPerText(t *testing.T) {
	db, _ := openCached(t)
	before := len(kept(t, db))
	for range 5 {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM t WHERE x > ?", 1).Scan(&n); err != nil || n != 2 {
			t.Fatalf("count = %d, %v; want 2", n, err)
		}
		if _, err := db.Exec("UPDATE t SET x = x WHERE x = ?", 2); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(kept(t, db)) - before; got != 2 {
		t.Errorf("the connection keeps %d more statements after two texts ran five times each, want 2", got)
	}
}

// A text run again while rows of it are open gets a statement of its own:
// sharing the kept one would reset it under the open rows.
func TestStmtCacheSameTextWhileRowsAreOpen(t *testing.T) {
	db, _ := openCached(t)
	const q = "SELECT x FROM t WHERE x >= ? ORDER BY x"
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.Query(q, 1)
	if err != nil {
		t.Fatal(err)
	}
	var outer, inner []int
	for rows.Next() {
		var x, y int
		if err := rows.Scan(&x); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(q, 3).Scan(&y); err != nil {
			t.Fatal(err)
		}
		outer, inner = append(outer, x), append(inner, y)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if fmt.Sprint(outer) != "[1 2 3]" || fmt.Sprint(inner) != "[3 3 3]" {
		t.Errorf("outer rows %v, inner queries %v; want [1 2 3] and [3 3 3]", outer, inner)
	}
	// The kept statement is free again once its rows closed.
	var n int
	if err := tx.QueryRow(q, 2).Scan(&n); err != nil || n != 2 {
		t.Errorf("after the rows closed: %d, %v; want 2", n, err)
	}
}

// A kept statement sees a schema another connection changed: SQLite
// compiles it again.
func TestStmtCacheAfterASchemaChange(t *testing.T) {
	db, path := openCached(t)
	const q = "SELECT * FROM t WHERE x = ?"
	var x int
	if err := db.QueryRow(q, 1).Scan(&x); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", dsn(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Exec("ALTER TABLE t ADD COLUMN y INTEGER NOT NULL DEFAULT 7"); err != nil {
		t.Fatal(err)
	}
	var y int
	if err := db.QueryRow(q, 1).Scan(&x, &y); err != nil || y != 7 {
		t.Errorf("the kept statement after a column was added: y = %d, %v; want 7", y, err)
	}
}

// A statement that failed (a constraint) runs again; past the bound the
// statement run longest ago is dropped, so one run often stays kept; a
// long text is not kept.
func TestStmtCacheAfterAnErrorAndPastItsBound(t *testing.T) {
	db, _ := openCached(t)
	const ins = "INSERT INTO t (x) VALUES (?)"
	if _, err := db.Exec(ins, 1); err == nil {
		t.Fatal("a duplicate key was inserted")
	}
	if _, err := db.Exec(ins, 4); err != nil {
		t.Fatalf("the statement after its failure: %v", err)
	}
	const often = "SELECT max(x) FROM t"
	for i := range 2 * stmtCacheMax {
		var n int
		if err := db.QueryRow(fmt.Sprintf("SELECT count(*) + %d FROM t", i)).Scan(&n); err != nil || n != 4+i {
			t.Fatalf("text %d: %d, %v; want %d", i, n, err, 4+i)
		}
		if err := db.QueryRow(often).Scan(&n); err != nil || n != 4 {
			t.Fatalf("%s: %d, %v", often, n, err)
		}
	}
	if got := len(kept(t, db)); got != stmtCacheMax {
		t.Errorf("the connection keeps %d statements, want its bound %d", got, stmtCacheMax)
	}
	if !kept(t, db)[often] {
		t.Errorf("the text run after every other one was dropped")
	}
	long := "SELECT count(*) FROM t WHERE x IN (" + strings.Repeat("0, ", stmtTextMax/3) + "4)"
	var n int
	if err := db.QueryRow(long).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a long text: %d, %v", n, err)
	}
	if kept(t, db)[long] {
		t.Errorf("a text of %d bytes is kept, over the %d bytes bound", len(long), stmtTextMax)
	}
}

// Rows of a kept statement describe their columns as the driver's own do.
func TestStmtCacheColumnTypes(t *testing.T) {
	db, path := openCached(t)
	plain, err := sql.Open("sqlite", dsn(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	describe := func(db *sql.DB) string {
		rows, err := db.Query("SELECT x, 'a' AS s FROM t")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		rows.Next()
		cts, err := rows.ColumnTypes()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ct := range cts {
			n, nok := ct.Nullable()
			out = append(out, fmt.Sprint(ct.Name(), ct.DatabaseTypeName(), ct.ScanType(), n, nok))
		}
		return strings.Join(out, "; ")
	}
	describe(db) // compiled and kept; the next run uses the kept statement
	if got, want := describe(db), describe(plain); got != want {
		t.Errorf("column types of a kept statement: %s; the driver's: %s", got, want)
	}
}
