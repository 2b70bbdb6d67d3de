package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readpast/readpast/sqlite"
)

// TestMigrateStatusSQLite runs `migrate status` in process on a SQLite
// database before migrating, after, and once a newer readpast has migrated
// it.
func TestMigrateStatusSQLite(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "status.db")
	latest := latestSQLiteVersion(t)
	if latest < 1 {
		t.Fatalf("latest SQLite schema version = %d", latest)
	}

	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append(args, "--database-url", db), &stdout, &stderr); code != 0 {
			t.Fatalf("readpast %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	check := func(when string, current, pending int, state string) {
		t.Helper()
		want := fmt.Sprintf("schema version %d of %d (%s)\n", current, latest, state)
		if out := cli("migrate", "status"); out != want {
			t.Errorf("%s: migrate status = %q, want %q", when, out, want)
		}
		var got map[string]int
		out := cli("migrate", "status", "--json")
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: migrate status --json = %q: %v", when, out, err)
		}
		wantJSON := map[string]int{"current": current, "latest": latest, "pending": pending}
		if fmt.Sprint(got) != fmt.Sprint(wantJSON) {
			t.Errorf("%s: migrate status --json = %v, want %v", when, got, wantJSON)
		}
	}

	// A missing database is an error naming it, and status creates nothing.
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"migrate", "status", "--database-url", db}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no database at "+db) {
		t.Errorf("migrate status of a missing database: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("migrate status created %s: %v", db, err)
	}
	// An empty file is an empty database.
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	check("before migrating", 0, latest, pendingText(latest))
	// status changes nothing: still unmigrated.
	check("status again", 0, latest, pendingText(latest))

	if out, want := cli("migrate", "up"), fmt.Sprintf("migrated the schema from version 0 to %d\n", latest); out != want {
		t.Errorf("migrate up = %q, want %q", out, want)
	}
	check("after migrating", latest, 0, "up to date")
	if out, want := cli("migrate"), fmt.Sprintf("schema was already up to date (version %d)\n", latest); out != want {
		t.Errorf("migrate again = %q, want %q", out, want)
	}

	// A newer readpast migrated the database.
	s, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO readpast_schema_migrations (version, applied_at) VALUES (?, 0)`, latest+2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check("newer database", latest+2, 0, "NEWER than this readpast")
}

// pendingText is how status names n pending migrations.
func pendingText(n int) string {
	if n == 1 {
		return "1 migration pending"
	}
	return fmt.Sprintf("%d migrations pending", n)
}

// latestSQLiteVersion is the schema version this build migrates a SQLite
// database to, as a scratch database's store reports it.
func latestSQLiteVersion(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "scratch.db"), sqlite.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, latest, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return latest
}
