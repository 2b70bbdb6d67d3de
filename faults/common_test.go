package faults_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// newDatabase creates an empty database on srv and returns its name.
func newDatabase(t testing.TB, srv *pgtest.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(p.Path, "/")
}

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	readpastBin.Remove()
	os.Exit(code)
}

// pgNow is the database's clock.
func pgNow(s *postgres.Store) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (t time.Time, err error) {
		err = s.Pool().QueryRow(ctx, "SELECT now()").Scan(&t)
		return t, err
	}
}

// localNow is the clock SQLite's leases are judged by.
func localNow(context.Context) (time.Time, error) { return time.Now(), nil }

// openPG opens and migrates a store on url, closed when the test ends.
func openPG(t testing.TB, url string) *postgres.Store {
	t.Helper()
	var s *postgres.Store
	err := retry(context.Background(), func(ctx context.Context) (err error) {
		s, err = postgres.Open(ctx, url)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// openSQLite opens (creating and migrating) a store on path, closed when
// the test ends.
func openSQLite(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// goWorker is the spec of a Go worker process on a store.
func goWorker(store, url string) workerSpec {
	return workerSpec{Store: store, URL: url, Lease: 2 * time.Second, Workers: 8, Poll: 100 * time.Millisecond,
		Work: 20 * time.Millisecond, FailFirst: true, RetryDelay: 200 * time.Millisecond}
}
