package readpast_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// eachStore runs test on a fresh PostgreSQL store and a fresh SQLite
// store, as subtests named for them.
func eachStore(t *testing.T, test func(t *testing.T, s readpast.Store)) {
	t.Run("postgres", func(t *testing.T) { test(t, newPGStore(t)) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "readpast.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
}
