package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

func TestOpenCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "jobs.db")
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not created: %v", err)
	}
	var mode string
	if err := s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q (%v), want wal", mode, err)
	}
}

func TestOpenBadDirectory(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The directory would have to be created under a regular file.
	path := filepath.Join(blocker, "sub", "jobs.db")
	_, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot create directory") || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want a clear error naming the path", err)
	}
	// A directory in place of the file.
	_, err = sqlite.Open(context.Background(), dir, sqlite.Options{})
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("directory as database: got %v", err)
	}
	if _, err := sqlite.Open(context.Background(), ":memory:", sqlite.Options{}); err == nil {
		t.Fatal("in-memory database accepted")
	}
}

func TestOpenNotADatabase(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"text":  []byte("hello, this is not a database at all, just some text that is long enough\n"),
		"short": []byte("SQLite"),
		"json":  []byte(`{"a":1}`),
	} {
		path := filepath.Join(dir, name+".db")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a SQLite database") {
			t.Fatalf("%s: got %v, want an error naming %s", name, err, path)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: file changed: %q", name, got)
		}
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(path + suffix); err == nil {
				t.Fatalf("%s: %s created next to a file that is not a database", name, suffix)
			}
		}
	}
}

func TestOpenSchemaTooNew(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	// A newer readpast migrated this database.
	newer := sqlite.SchemaVersion() + 1
	if _, err := s.DB().Exec(`INSERT INTO readpast_schema_migrations (version, applied_at) VALUES (?, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	_, err = sqlite.Open(ctx, path, sqlite.Options{})
	if !errors.Is(err, readpast.ErrSchemaTooNew) {
		t.Fatalf("got %v, want ErrSchemaTooNew", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("opening a newer database changed the file")
	}

	// Migrate on a store opened without migrating says the same.
	s, err = sqlite.Open(ctx, path, sqlite.Options{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); !errors.Is(err, readpast.ErrSchemaTooNew) {
		t.Fatalf("Migrate: got %v, want ErrSchemaTooNew", err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_jobs`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("jobs after refused migration: %d (%v)", n, err)
	}
}

func TestMigrateTwice(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sqlite.Open(ctx, path, sqlite.Options{})
			if err == nil {
				err = errors.Join(s.Migrate(ctx), s.Close())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestTimesAndPayloadRoundTrip(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	runAt := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 3600))
	payload := json.RawMessage(`{ "spaced" : [1, 2.50, "é"] }`)
	j, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", RunAt: runAt, Payload: payload}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Get(ctx, j[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	want := runAt.Truncate(time.Microsecond).UTC()
	if !g.RunAt.Equal(want) || g.RunAt.Location() != time.UTC || !j[0].RunAt.Equal(g.RunAt) {
		t.Fatalf("run_at %v (enqueue said %v), want %v in UTC", g.RunAt, j[0].RunAt, want)
	}
	if string(g.Payload) != string(payload) {
		t.Fatalf("payload %s, want the exact text %s", g.Payload, payload)
	}
	if g.CreatedAt.Location() != time.UTC || !g.CreatedAt.Equal(j[0].CreatedAt) {
		t.Fatalf("created_at %v vs %v", g.CreatedAt, j[0].CreatedAt)
	}
}

func TestEnqueueLargeBatchChunks(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	ps := make([]readpast.EnqueueParams, 2500)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: []string{"", "a", "b"}[i%3]}
	}
	jobs, err := s.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].ID != jobs[i-1].ID+1 {
			t.Fatalf("ids %d then %d", jobs[i-1].ID, jobs[i].ID)
		}
	}
	// All or none: a batch whose last chunk fails leaves nothing behind.
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Enqueue(ctx2, ps); err == nil {
		t.Fatal("enqueue with a cancelled context succeeded")
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Count != 2500 {
		t.Fatalf("stats %+v, want 2500 pending", st)
	}
}

func TestSubscribe(t *testing.T) {
	s := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // coalesced: several enqueues, one buffered signal
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no wake-up after enqueue")
	}
	select {
	case <-ch:
		t.Fatal("signals not coalesced")
	default:
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if err := s.Release(ctx, c[0].ID, c[0].Token); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no wake-up after release")
	}
	cancel()
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("value after cancel")
		}
	case <-time.After(time.Second):
		t.Fatal("channel not closed after ctx ended")
	}
}

func TestEnqueueTxAndCompleteTx(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rolled, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, rolled[0].ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("job of a rolled-back tx: %v", err)
	}

	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`CREATE TABLE app_orders (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	kept, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", Group: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: ""}}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("invalid job in tx: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Unlike a PostgreSQL sequence, SQLite's AUTOINCREMENT counter rolls
	// back with the transaction: the id of a job that never existed may be
	// given again. Ids of committed jobs are never reused.
	if kept[0].ID < rolled[0].ID {
		t.Fatalf("id %d lower than rolled-back id %d", kept[0].ID, rolled[0].ID)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != kept[0].ID {
		t.Fatalf("claim: %v %v", c, err)
	}

	// A completion in a rolled-back transaction did not happen.
	tx, _ = s.DB().BeginTx(ctx, nil)
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[0].ID, Token: c[0].Token, Result: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if j, _ := s.Get(ctx, c[0].ID); j.State != readpast.StateRunning {
		t.Fatalf("state %s after rolled-back CompleteTx", j.State)
	}
	tx, _ = s.DB().BeginTx(ctx, nil)
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[0].ID, Token: "stale", Result: nil}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale CompleteTx: %v", err)
	}
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[0].ID, Token: c[0].Token, Result: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	j, err := s.Get(ctx, c[0].ID)
	if err != nil || j.State != readpast.StateSucceeded || string(j.Result) != `{"n":2}` {
		t.Fatalf("after CompleteTx: %+v %v", j, err)
	}
	// The group slot was freed in the caller's transaction.
	g, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Group: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 5, Lease: time.Minute}); err != nil || len(c) != 1 || c[0].ID != g[0].ID {
		t.Fatalf("group not freed by CompleteTx: %v %v", c, err)
	}
}

// holdWriteLock opens a second, independent connection to the store's file
// and holds BEGIN IMMEDIATE on it for d. It returns once the lock is held;
// the returned channel closes when it is released.
func holdWriteLock(t *testing.T, s *sqlite.Store, d time.Duration) <-chan struct{} {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "UPDATE readpast_jobs SET priority = priority WHERE id = -1"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(d)
		if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
			t.Error(err)
		}
		conn.Close()
	}()
	return released
}

// TestBusyRetried: another connection holds the write lock longer than the
// busy timeout; every write waits and succeeds, none reports SQLITE_BUSY,
// and reads go on meanwhile.
func TestBusyRetried(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"), sqlite.Options{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "seed"}})
	if err != nil {
		t.Fatal(err)
	}

	const hold = 1500 * time.Millisecond
	start := time.Now()
	released := holdWriteLock(t, s, hold)

	// Reads are not blocked by the writer (WAL).
	if _, err := s.Get(ctx, seed[0].ID); err != nil {
		t.Fatalf("read during the lock: %v", err)
	}
	if time.Since(start) > hold/2 {
		t.Fatal("read waited for the write lock")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Priority: w*10 + i}})
				if err != nil {
					errs <- err
					return
				}
				c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1, Lease: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				for _, j := range c {
					res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
					if err == nil {
						err = res[0]
					}
					if err != nil {
						errs <- err
						return
					}
				}
				_ = jobs
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write surfaced an error during a held lock: %v", err)
	}
	<-released
	if time.Since(start) < hold {
		t.Fatal("writes finished before the lock was released?")
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, x := range st {
		total += x.Count
	}
	if total != 41 {
		t.Fatalf("stats %+v: %d jobs, want 41", st, total)
	}
}

// TestBusyBounded: retries stop after LockTimeout with an error.
func TestBusyBounded(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"),
		sqlite.Options{BusyTimeout: 50 * time.Millisecond, LockTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	released := holdWriteLock(t, s, 2*time.Second)
	start := time.Now()
	_, err = s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("got %v, want a lock timeout", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("gave up after %v, want about 300ms", d)
	}
	// A cancelled context ends the wait too.
	ctx2, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Enqueue(ctx2, []readpast.EnqueueParams{{Kind: "k"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
	<-released
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
}
