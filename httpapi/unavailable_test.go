package httpapi

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// wantUnavailable requires a 503 unavailable with a Retry-After.
func (e *testEnv) wantUnavailable(method, path, body string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, stringsReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b := readAll(e.t, resp)
	checkError(e.t, method+" "+path, resp.StatusCode, b, http.StatusServiceUnavailable, CodeUnavailable, "")
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		e.t.Errorf("%s %s: Retry-After %q", method, path, resp.Header.Get("Retry-After"))
	}
}

// TestPostgresOutage: with PostgreSQL stopped, every request that needs
// the database is 503 unavailable with Retry-After (it was 500 internal),
// and the server serves again once PostgreSQL is back.
func TestPostgresOutage(t *testing.T) {
	ctx := context.Background()
	pg, err := pgtest.Start(ctx, pgtest.Options{Logf: t.Logf})
	if err != nil {
		if errors.Is(err, pgtest.ErrNoBinaries) && !pgtest.InCI() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	url, err := pg.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, store, nil)
	j := e.enqueue(`{"kind":"a"}`)
	e.must("GET", "/v1/stats", "", http.StatusOK, nil)

	if err := pg.Shutdown(); err != nil {
		t.Fatal(err)
	}
	e.wantUnavailable("GET", "/v1/stats", "")
	e.wantUnavailable("POST", "/v1/jobs", `{"kind":"a"}`)
	e.wantUnavailable("POST", "/v1/claim", `{"worker":"w"}`)
	e.wantUnavailable("POST", "/v1/claim", `{"worker":"w","wait_seconds":5}`)
	e.wantUnavailable("GET", "/v1/jobs", "")
	e.wantUnavailable("GET", "/v1/jobs/"+itoa(j.ID), "")
	e.wantUnavailable("POST", "/v1/jobs/"+itoa(j.ID)+"/cancel", "")
	e.wantUnavailable("GET", "/readyz", "")

	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, b := e.do("GET", "/v1/stats", "")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %d %s", status, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.must("POST", "/v1/jobs", `{"kind":"a"}`, http.StatusCreated, nil)
}

// TestSQLiteLockedIsUnavailable: a SQLite database another connection keeps
// write-locked past the store's lock timeout is 503, not 500.
func TestSQLiteLockedIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locked.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{BusyTimeout: 20 * time.Millisecond, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := newEnvOn(t, store, nil)

	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e.wantUnavailable("POST", "/v1/jobs", `{"kind":"a"}`)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	e.must("POST", "/v1/jobs", `{"kind":"a"}`, http.StatusCreated, nil)
}
