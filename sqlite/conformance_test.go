package sqlite_test

import (
	"context"
	"database/sql"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/storetest"
)

// openTemp opens a migrated store on a new file in a temp dir; the store is
// closed when the test ends.
func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "readpast.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var stressDuration = flag.Duration("stress", 5*time.Second, "how long the group stress test runs")

func TestConformance(t *testing.T) {
	// 16 claimers and 5,000 jobs, as in the reliability plan for SQLite
	// (one writer at a time: more claimers only queue longer).
	jobs := 5000
	if raceEnabled {
		jobs = 1500
	}
	storetest.Run(t, storetest.Harness{
		New:            func(t *testing.T) readpast.Store { return openTemp(t) },
		StressJobs:     jobs,
		Claimers:       16,
		Groups:         groupStates,
		StressDuration: *stressDuration,
		TagRows: func(ctx context.Context, st readpast.Store) (n int64, err error) {
			err = st.(*sqlite.Store).DB().QueryRowContext(ctx, "SELECT count(*) FROM readpast_job_tags").Scan(&n)
			return n, err
		},
		BeginSQLTx: func(t *testing.T, st readpast.Store) *sql.Tx {
			tx, err := st.(*sqlite.Store).DB().BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx
		},
	})
}
