// Package sqlite is the embedded readpast store: one SQLite file, opened with
// the pure-Go driver modernc.org/sqlite, so programs that use it build
// without cgo.
//
// The database runs in WAL mode. Every write transaction starts with BEGIN
// IMMEDIATE (it takes the write lock up front), goes through a one-connection
// write pool, and is retried as a whole when SQLite reports SQLITE_BUSY or
// SQLITE_LOCKED, so a transient lock never reaches a caller as an error.
// Reads (Get, List, Stats) use a separate read-only pool and never wait for
// writers.
//
// Unlike the PostgreSQL store, one writer runs at a time: claims serialize
// instead of skipping each other's locked rows, and Subscribe only hears
// about jobs made claimable by the same Store; other processes sharing the
// file are found by polling.
//
// # Use
//
// [Open] opens the database file, creating it and its directory when
// missing, and migrates it (unless [Options].SkipMigrate); the zero
// [Options] are ready to use. Several processes may open the same file.
// Give the store to readpast.NewClient, or call its readpast.Store
// methods directly: the examples of package readpast all run on this
// store.
//
// [Store.EnqueueSQLTx] and [Store.CompleteSQLTx] join a transaction the
// caller began on [Store.DB], so that the jobs exist, or the completion
// stands, only if the caller's own writes commit. Options.ReadOnly opens
// a database for inspection only, without writing anything. A database
// file that cannot be used is an error wrapping readpast.ErrUnavailable
// ([IsUnavailable]).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/readpast/readpast/internal/wake"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/readpast/readpast"
)

// Defaults for Options.
const (
	// DefaultBusyTimeout is how long one SQLite statement waits for a lock
	// held by another connection before the store's retry loop takes over.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultLockTimeout bounds the store's retries of one transaction that
	// keeps finding the database locked.
	DefaultLockTimeout = time.Minute
	// DefaultReadConns is the size of the read-only connection pool.
	DefaultReadConns = 4
)

// Options tunes Open. The zero value is ready to use.
type Options struct {
	// Logger receives the store's warnings (lock contention that outlasts
	// the retries). Nil discards them.
	Logger *slog.Logger
	// BusyTimeout is SQLite's busy_timeout: how long one attempt waits for
	// a lock held by another connection. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// LockTimeout bounds how long the store keeps retrying a transaction
	// that finds the database busy or locked before it returns the error.
	// Zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// ReadConns is the size of the read-only pool used by Get, List and
	// Stats. Zero means DefaultReadConns.
	ReadConns int
	// SynchronousNormal sets synchronous=NORMAL instead of FULL: faster
	// commits, but the last transactions before a power failure (not a
	// process crash) may be lost.
	SynchronousNormal bool
	// SkipMigrate makes Open skip Migrate (and its schema version check).
	SkipMigrate bool
	// MustExist makes Open fail, creating nothing, when there is no
	// database file at the path: the error names the path and wraps
	// fs.ErrNotExist.
	MustExist bool
	// ReadOnly opens the database for reading only: Open creates and
	// writes nothing (no directory, file, WAL switch or migration) and
	// every write fails. It implies MustExist and SkipMigrate. A database
	// in a folder this process cannot write to (where SQLite cannot create
	// the -shm file WAL mode reads need) is read as it is on disk, with
	// SQLite's immutable mode.
	ReadOnly bool
}

// Store is a readpast.Store and readpast.Notifier on one SQLite file.
// It is safe for concurrent use. Several processes may open the same file.
type Store struct {
	path        string
	write       *sql.DB // one connection, BEGIN IMMEDIATE transactions
	read        *sql.DB // read-only pool
	log         *slog.Logger
	lockTimeout time.Duration
	now         func() time.Time

	hub  *wake.Hub   // in-process wake-ups
	due  *wake.Alarm // wakes claimers when jobs written for later become due (due.go)
	once sync.Once
}

var (
	_ readpast.Store       = (*Store)(nil)
	_ readpast.Notifier    = (*Store)(nil)
	_ readpast.GroupPruner = (*Store)(nil)
)

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// Open opens (creating it if needed) the SQLite database at path, creates
// its directory when missing, and migrates it unless opts.SkipMigrate.
// opts.MustExist and opts.ReadOnly open an existing database only.
//
// It fails with a clear error when the directory cannot be created, when
// path holds a file that is not a SQLite database (the file is left as it
// is), when the file or its folder is not writable (naming them), and with
// readpast.ErrSchemaTooNew when a newer readpast migrated the database
// (nothing is changed).
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if path == ":memory:" || hasPrefixFold(path, "file::memory:") {
		return nil, errors.New("sqlite: in-memory databases are not supported; use a file (in tests, one in t.TempDir())")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: database path %q: %w", path, err)
	}
	if opts.ReadOnly {
		opts.MustExist, opts.SkipMigrate = true, true
	}
	if err := checkFile(abs, opts.MustExist); err != nil {
		return nil, err
	}

	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = DefaultReadConns
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path:        abs,
		log:         log,
		lockTimeout: opts.LockTimeout,
		now:         time.Now,
		hub:         wake.New(),
	}
	s.due = wake.NewAlarm(s.wake)

	busy := strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10)
	if opts.ReadOnly {
		if err := s.openReadOnly(ctx, busy, opts.ReadConns); err != nil {
			return nil, err
		}
		return s, nil
	}
	syncMode := "FULL"
	if opts.SynchronousNormal {
		syncMode = "NORMAL"
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+busy+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Set("_txlock", "immediate")
	s.write, err = openDB(dsn(abs, q))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", abs, err)
	}
	// One writer connection: SQLite runs one write transaction at a time,
	// so writers of this process queue in database/sql instead of polling
	// SQLite's lock.
	s.write.SetMaxOpenConns(1)
	s.write.SetMaxIdleConns(1)
	s.write.SetConnMaxIdleTime(0)
	s.write.SetConnMaxLifetime(0)

	if err := s.initWAL(ctx); err != nil {
		s.write.Close()
		return nil, explainOpen(abs, err)
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout("+busy+")")
	rq.Add("_pragma", "query_only(1)")
	s.read, err = openDB(dsn(abs, rq))
	if err != nil {
		s.write.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", abs, err)
	}
	s.read.SetMaxOpenConns(opts.ReadConns)
	s.read.SetMaxIdleConns(opts.ReadConns)

	if !opts.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			s.Close()
			return nil, explainOpen(abs, err)
		}
	}
	return s, nil
}

// openReadOnly opens both pools of s for reading only (query_only). It
// opens the file read-write without creating it (mode=rw), so that SQLite
// can remove the -wal and -shm files a WAL read needs when the last
// connection closes and nothing is left behind; when the file or folder is
// not writable, read-only (mode=ro); and when SQLite cannot read it that
// way either because it cannot create the -shm file (a read-only folder),
// as an immutable file.
func (s *Store) openReadOnly(ctx context.Context, busy string, conns int) error {
	var err error
	for _, mode := range []string{"rw", "ro", "immutable"} {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout("+busy+")")
		q.Add("_pragma", "query_only(1)")
		q.Set("mode", mode)
		if mode == "immutable" {
			q.Set("mode", "ro")
			q.Set("immutable", "1")
		}
		if s.read, err = openDB(dsn(s.path, q)); err != nil {
			return fmt.Errorf("sqlite: open %q: %w", s.path, err)
		}
		s.read.SetMaxOpenConns(conns)
		s.read.SetMaxIdleConns(conns)
		// Writes go to a query_only pool too, and fail there.
		if s.write, err = openDB(dsn(s.path, q)); err != nil {
			s.read.Close()
			return fmt.Errorf("sqlite: open %q: %w", s.path, err)
		}
		s.write.SetMaxOpenConns(1)
		var n int
		err = s.read.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
		if err == nil {
			return nil
		}
		s.read.Close()
		s.write.Close()
		if !cannotOpen(err) {
			break
		}
	}
	return fmt.Errorf("sqlite: cannot read database %q: %w", s.path, err)
}

// cannotOpen reports whether err is SQLITE_CANTOPEN or SQLITE_READONLY (any
// extended code): a permission problem, not a damaged database.
func cannotOpen(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY:
			return true
		}
	}
	return false
}

// explainOpen says which path is at fault, and what to do, when err from
// opening or first writing the database at abs is a permission problem:
// SQLite's own message ("unable to open database file") names neither.
func explainOpen(abs string, err error) error {
	if !cannotOpen(err) {
		return err
	}
	dir := filepath.Dir(abs)
	base := filepath.Base(abs)
	_, statErr := os.Stat(abs)
	switch {
	case !writable(dir):
		return fmt.Errorf("sqlite: cannot write database %q: the folder %q is not writable, and SQLite needs to create %s-wal and %s-shm in it; use a writable folder (reading only works: readpast's read commands open databases read-only): %w",
			abs, dir, base, base, err)
	case statErr == nil && !writable(abs):
		return fmt.Errorf("sqlite: cannot write database %q: the file is read-only (reading only works: readpast's read commands open databases read-only): %w", abs, err)
	}
	return fmt.Errorf("sqlite: cannot open database %q for writing: %w", abs, err)
}

// dsn makes the driver's URI for the file at abs with query parameters q.
func dsn(abs string, q url.Values) string {
	return "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath() + "?" + q.Encode()
}

// checkFile makes sure abs can hold a SQLite database without touching an
// existing file: its directory exists (it is created if missing, unless
// mustExist), and an existing non-empty file starts with the SQLite
// header. With mustExist a missing file is an error wrapping
// fs.ErrNotExist.
func checkFile(abs string, mustExist bool) error {
	dir := filepath.Dir(abs)
	if !mustExist {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("sqlite: cannot create directory %q for database %q: %w", dir, abs, err)
		}
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		if mustExist {
			return fmt.Errorf("sqlite: no database at %q: %w", abs, fs.ErrNotExist)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: database %q: %w", abs, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("sqlite: database path %q is a directory", abs)
	}
	if fi.Size() == 0 {
		return nil // SQLite treats an empty file as an empty database
	}
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("sqlite: database %q: %w", abs, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || string(head) != sqliteHeader {
		return fmt.Errorf("sqlite: %q is not a SQLite database (no SQLite header); the file was not changed", abs)
	}
	return nil
}

// initWAL switches the database to WAL mode (a no-op when it already is).
func (s *Store) initWAL(ctx context.Context) error {
	return s.retry(ctx, "enable WAL", func() error {
		var mode string
		if err := s.write.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
			return err
		}
		if mode != "wal" {
			return fmt.Errorf("journal mode is %q, want wal", mode)
		}
		return nil
	})
}

// DB returns the store's write pool. Use it to begin the transactions given
// to EnqueueSQLTx and CompleteSQLTx. It has one connection: while a transaction
// on it is open, every other write of this Store waits for it to end, so do
// not call the Store's own write methods (Enqueue, Claim, ...) inside one.
// Its connections keep the statements they compiled (see stmtcache.go), so
// Conn.Raw hands out that wrapper, not modernc.org/sqlite's connection.
func (s *Store) DB() *sql.DB { return s.write }

// Close closes both connection pools and every Subscribe channel.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.due.Stop()
		s.hub.Close()
		if s.read != nil {
			err = s.read.Close()
		}
		err = errors.Join(err, s.write.Close())
	})
	return err
}

// Subscribe returns a channel that receives a value soon after this Store
// commits a change that makes jobs claimable (enqueue, retry, release, a
// failure or rescue with attempts left, a group slot freed). Signals are
// coalesced. Changes made by other processes are not signalled: poll for
// them. The channel is closed when ctx ends or the Store is closed.
func (s *Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	ch, err := s.hub.Subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: subscribe: %w", err)
	}
	return ch, nil
}

// wake signals every subscriber without blocking.
func (s *Store) wake() { s.hub.Broadcast() }

// isBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED (any extended
// code): another connection holds a lock, and trying again later may work.
func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}

// retry runs fn until it returns an error that is not busy/locked, ctx ends,
// or the lock timeout passes, sleeping with jittered exponential backoff
// between attempts. fn must be safe to run again from scratch.
func (s *Store) retry(ctx context.Context, op string, fn func() error) error {
	start := time.Now()
	backoff := time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if !isBusy(err) || ctx.Err() != nil {
			return fmt.Errorf("sqlite: %s: %w", op, classify(err))
		}
		if time.Since(start) > s.lockTimeout {
			s.log.WarnContext(ctx, "sqlite database stayed locked", slog.String("op", op),
				slog.Int("attempts", attempt), slog.Duration("waited", time.Since(start)), slog.Any("error", err))
			return fmt.Errorf("sqlite: %s: database stayed locked for %s: %w", op, time.Since(start).Round(time.Millisecond), classify(err))
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
		case <-t.C:
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE) and commits it,
// running the whole transaction again when the database is busy or locked.
// fn must reset whatever it records outside the database on each run.
func (s *Store) writeTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.retry(ctx, op, func() error {
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// readOp runs fn against the read pool, retrying when the database is busy.
func (s *Store) readOp(ctx context.Context, op string, fn func(db *sql.DB) error) error {
	return s.retry(ctx, op, func() error { return fn(s.read) })
}

// micros converts t to unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros converts unix microseconds to a UTC time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// hasPrefixFold reports whether s starts with prefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
