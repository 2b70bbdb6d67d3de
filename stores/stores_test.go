package stores_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/stores"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url    string
		kind   stores.Kind
		target string
	}{
		{"", stores.KindSQLite, "readpast.db"},
		{"jobs.db", stores.KindSQLite, "jobs.db"},
		{"/var/lib/x/jobs.db", stores.KindSQLite, "/var/lib/x/jobs.db"},
		{"sqlite:jobs.db", stores.KindSQLite, "jobs.db"},
		{"sqlite://jobs.db", stores.KindSQLite, "jobs.db"},
		{"sqlite:///abs/jobs.db", stores.KindSQLite, "/abs/jobs.db"},
		{"SQLite:jobs.db", stores.KindSQLite, "jobs.db"},
		{"file:jobs.db", stores.KindSQLite, "jobs.db"},
		{"file:///abs/jobs.db", stores.KindSQLite, "/abs/jobs.db"},
		{"postgres://u:p@localhost/db", stores.KindPostgres, "postgres://u:p@localhost/db"},
		{"postgresql://localhost/db?sslmode=disable", stores.KindPostgres, "postgresql://localhost/db?sslmode=disable"},
	} {
		kind, target, err := stores.Parse(tc.url)
		if err != nil || kind != tc.kind || target != tc.target {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", tc.url, kind, target, err, tc.kind, tc.target)
		}
	}
	for _, bad := range []string{"mysql://localhost/db", "redis://x", "sqlite:", "file://", "host=localhost dbname=jobs"} {
		if _, _, err := stores.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{
		filepath.Join(dir, "plain.db"),
		"sqlite:" + filepath.Join(dir, "a.db"),
		"sqlite://" + filepath.Join(dir, "b.db"),
		"file:" + filepath.Join(dir, "c.db"),
	} {
		s, err := stores.Open(ctx, url, nil)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if _, ok := s.(*sqlite.Store); !ok {
			t.Fatalf("%s: got %T", url, s)
		}
		// Opened migrated and ready.
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenDefaultInWorkingDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := stores.Open(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(stores.DefaultSQLiteFile); err != nil {
		t.Fatalf("default database not created in the working directory: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	_, err := stores.Open(ctx, "mysql://localhost/db", nil)
	if err == nil || !strings.Contains(err.Error(), `"mysql"`) {
		t.Fatalf("unknown scheme: %v", err)
	}
	notDB := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notDB, []byte("just some notes, not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := stores.Open(ctx, "sqlite:"+notDB, nil); err == nil || !strings.Contains(err.Error(), notDB) {
		t.Fatalf("not a database: %v", err)
	}
}

func TestRedact(t *testing.T) {
	abs, _ := filepath.Abs("jobs.db")
	for in, want := range map[string]string{
		"postgres://u:secret@db.example:5432/app?sslmode=require": "postgres://u@db.example:5432/app?sslmode=require",
		"postgres://db/app?password=secret&sslmode=disable":       "postgres://db/app?sslmode=disable",
		"postgresql://u@db/app":                                   "postgresql://u@db/app",
		"jobs.db":                                                 abs,
		"sqlite:jobs.db":                                          abs,
		"mysql://u:secret@x/y":                                    "(invalid database URL)",
	} {
		if got := stores.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenExisting: read-only and existing-only opens create nothing, and
// CheckSchema tells an unmigrated database from a current one.
func TestOpenExisting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "nonexist", "dir", "x.db")
	for _, opts := range []stores.Options{{Existing: true}, {ReadOnly: true}} {
		if _, err := stores.OpenWith(ctx, missing, opts); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
			t.Errorf("OpenWith(%+v) of a missing file = %v", opts, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("created %v", entries)
	}

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := stores.OpenWith(ctx, empty, stores.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := stores.CheckSchema(ctx, s); !errors.Is(err, readpast.ErrSchemaTooOld) {
		t.Errorf("CheckSchema of an empty database = %v, want ErrSchemaTooOld", err)
	}
	s.Close()

	s, err = stores.Open(ctx, empty, nil) // migrates
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = stores.OpenWith(ctx, empty, stores.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := stores.CheckSchema(ctx, s); err != nil {
		t.Errorf("CheckSchema of a migrated database = %v", err)
	}
}
