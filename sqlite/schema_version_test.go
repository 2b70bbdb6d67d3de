package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// schemaVersionOf asks s for its schema version through the optional
// interface, as `readpast migrate status` does.
func schemaVersionOf(t *testing.T, s readpast.Store) (current, latest int) {
	t.Helper()
	sv, ok := s.(readpast.SchemaVersioner)
	if !ok {
		t.Fatalf("%T does not implement readpast.SchemaVersioner", s)
	}
	current, latest, err := sv.SchemaVersion(context.Background())
	if err != nil {
		t.Fatalf("SchemaVersion: %v", err)
	}
	return current, latest
}

func TestSchemaVersionMigrated(t *testing.T) {
	s := openTemp(t)
	cur, latest := schemaVersionOf(t, s)
	if latest != sqlite.SchemaVersion() || latest < 1 {
		t.Fatalf("latest = %d, want sqlite.SchemaVersion() = %d (>= 1)", latest, sqlite.SchemaVersion())
	}
	if cur != latest {
		t.Fatalf("migrated store: current = %d, want %d", cur, latest)
	}
}

func TestSchemaVersionUnmigrated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cur, latest := schemaVersionOf(t, s)
	if cur != 0 || latest != sqlite.SchemaVersion() {
		t.Fatalf("empty database: got %d of %d, want 0 of %d", cur, latest, sqlite.SchemaVersion())
	}
	// Asking creates nothing.
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables after SchemaVersion on an empty database: %d (%v), want 0", n, err)
	}

	// Migrating then brings it to latest.
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, latest := schemaVersionOf(t, s); cur != latest {
		t.Fatalf("after Migrate: got %d of %d", cur, latest)
	}
}

func TestSchemaVersionNewer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A newer readpast migrated this database, several versions ahead.
	newer := sqlite.SchemaVersion() + 3
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO readpast_schema_migrations (version, applied_at) VALUES (?, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	if cur, latest := schemaVersionOf(t, s); cur != newer || latest != sqlite.SchemaVersion() {
		t.Fatalf("newer database: got %d of %d, want %d of %d", cur, latest, newer, sqlite.SchemaVersion())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A store opened without migrating (as `readpast migrate status` opens
	// it) reports the same, where Open with Migrate would refuse.
	s, err = sqlite.Open(ctx, path, sqlite.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cur, latest := schemaVersionOf(t, s); cur != newer || latest != sqlite.SchemaVersion() {
		t.Fatalf("newer database reopened: got %d of %d, want %d of %d", cur, latest, newer, sqlite.SchemaVersion())
	}
}
