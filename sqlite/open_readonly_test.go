package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// TestOpenMustExist: MustExist and ReadOnly create nothing for a missing
// database, and say which path is missing.
func TestOpenMustExist(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "no", "such", "x.db")
	for _, opts := range []sqlite.Options{{MustExist: true}, {ReadOnly: true}} {
		_, err := sqlite.Open(context.Background(), path, opts)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(%+v) of a missing database = %v, want fs.ErrNotExist naming %s", opts, err, path)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("Open(%+v) created %v", opts, entries)
		}
	}
}

// TestOpenReadOnly: a read-only store reads, refuses every write, and
// leaves the database byte for byte as it was, with no -wal or -shm files
// behind.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	rw, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := rw.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	ro, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := ro.Get(ctx, jobs[0].ID); err != nil || j.Kind != "k" {
		t.Errorf("Get = %+v, %v", j, err)
	}
	if cur, latest, err := ro.SchemaVersion(ctx); err != nil || cur != latest {
		t.Errorf("SchemaVersion = %d, %d, %v", cur, latest, err)
	}
	if _, err := ro.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err == nil {
		t.Error("a read-only store enqueued")
	}
	if _, err := ro.Cancel(ctx, jobs[0].ID); err == nil {
		t.Error("a read-only store cancelled")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the database changed")
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"x.db"}) {
		t.Errorf("files after a read-only open: %v", names)
	}
}

// TestOpenReadOnlyFolder: a database in a folder this process cannot write
// to can still be read, and opening it for writing says which folder is
// the problem. Permissions do not bind root: the end-to-end test of the
// readpast command runs the same case as an unprivileged user.
func TestOpenReadOnlyFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write anywhere; cmd/readpast's TestE2E covers this as nobody")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ro")
	path := filepath.Join(dir, "x.db")
	rw, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rw.Close()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })

	ro, err := sqlite.Open(ctx, path, sqlite.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open in a read-only folder: %v", err)
	}
	if _, err := ro.Stats(ctx); err != nil {
		t.Errorf("Stats: %v", err)
	}
	ro.Close()
	for _, p := range []string{path, filepath.Join(dir, "new.db")} {
		_, err := sqlite.Open(ctx, p, sqlite.Options{})
		if err == nil || !strings.Contains(err.Error(), "folder "+`"`+dir+`" is not writable`) {
			t.Errorf("Open(%s) in a read-only folder = %v, want it to name the folder", p, err)
		}
	}
}
