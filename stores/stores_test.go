package stores_test

import (
	"context"
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
