package postgres_test

import (
	"context"
	"database/sql"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newStore opens a migrated store on a fresh database.
func newStore(t testing.TB) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

var stressDuration = flag.Duration("stress", 5*time.Second, "how long the group stress test runs")

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:            func(t *testing.T) readpast.Store { return newStore(t) },
		StressJobs:     20000,
		Claimers:       32,
		Groups:         groupStates,
		Deadlocks:      deadlocks,
		StressDuration: *stressDuration,
		TagRows: func(ctx context.Context, st readpast.Store) (n int64, err error) {
			err = st.(*postgres.Store).Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_job_tags").Scan(&n)
			return n, err
		},
		BeginSQLTx: func(t *testing.T, st readpast.Store) *sql.Tx {
			db, err := sql.Open("pgx", st.(*postgres.Store).Pool().Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return tx
		},
	})
}
