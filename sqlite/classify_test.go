package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func TestIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	s, err := Open(ctx, path, Options{BusyTimeout: 20 * time.Millisecond, LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// A SQL error is about the request, not the database's availability.
	_, sqlErr := s.read.ExecContext(ctx, "SELECT * FROM no_such_table")
	// A write lock held past the lock timeout.
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, lockErr := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
	tx.Rollback()

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("boom"), false},
		{"no such table", sqlErr, false},
		{"locked", lockErr, true},
		{"deadline", context.DeadlineExceeded, true},
		{"sentinel", readpast.ErrUnavailable, true},
		{"not found", readpast.ErrNotFound, false},
	} {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if c := classify(tc.err); errors.Is(c, readpast.ErrUnavailable) != tc.want {
			t.Errorf("%s: classify(%v) = %v", tc.name, tc.err, c)
		}
	}
	if sqlErr == nil || lockErr == nil {
		t.Fatalf("setup: %v, %v", sqlErr, lockErr)
	}
	// The store marks it: callers branch with errors.Is.
	if !errors.Is(lockErr, readpast.ErrUnavailable) {
		t.Errorf("Enqueue on a database locked past the lock timeout: %v, want ErrUnavailable", lockErr)
	}
}
