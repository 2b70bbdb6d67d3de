package postgres_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// newStore opens a migrated store on a fresh database.
func newStore(t testing.TB) *postgres.Store {
	t.Helper()
	return pgharness.Open(t, pgtest.URL(t))
}

var stressDuration = flag.Duration("stress", 5*time.Second, "how long the group stress test runs")

func TestConformance(t *testing.T) {
	h := pgharness.Harness()
	h.New = func(t *testing.T) readpast.Store { return newStore(t) }
	h.StressJobs, h.Claimers, h.StressDuration = 20000, 32, *stressDuration
	h.Deadlocks = deadlocks
	storetest.Run(t, h)
}
