// Package pgtest starts throwaway PostgreSQL servers for tests.
//
// Start runs initdb into a temporary directory and starts `postgres`
// directly as a child process on 127.0.0.1 and a free port, so the test
// binary owns its pid: Stop, Kill and Restart act on that pid only. When the
// test binary runs as root, initdb and postgres run as the `postgres` user
// (or `nobody`), because PostgreSQL refuses to run as root.
//
// Most tests only need URL, which hands each test a fresh empty database,
// either on the server named by READPAST_DATABASE_URL or on one server per
// test binary that is started on first use and stopped by Main:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// The package is Linux-only: it relies on /proc and on
// syscall.SysProcAttr's Credential and Pdeathsig.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries reports that no PostgreSQL server binaries (initdb and
// postgres) were found. URL skips the test on it unless CI=true.
var ErrNoBinaries = errors.New("pgtest: PostgreSQL server binaries not found")

const (
	// readyTimeout bounds how long a start waits for connections to be
	// accepted, including crash recovery after Kill.
	readyTimeout = 2 * time.Minute
	// stopTimeout bounds a fast shutdown before Stop falls back to SIGKILL.
	stopTimeout = time.Minute
	// reapTimeout bounds the wait for killed processes to disappear.
	reapTimeout = 30 * time.Second
	// portAttempts is how many free ports Start tries before giving up.
	portAttempts = 5
	// logTailBytes is how much of the server log errors quote.
	logTailBytes = 4096
)

// dbSeq numbers the databases this test binary creates.
var dbSeq atomic.Uint64

// createDatabase creates a uniquely named empty database through the
// connection string admin and returns its name.
func createDatabase(ctx context.Context, admin string) (string, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("readpast_test_%d_%d_%s", os.Getpid(), dbSeq.Add(1), hex.EncodeToString(rnd[:]))
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("pgtest: connecting to create a database: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: creating database %s: %w", name, err)
	}
	return name, nil
}

// dropDatabase drops database name through the connection string admin,
// ending any sessions still connected to it.
func dropDatabase(ctx context.Context, admin, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("pgtest: connecting to drop database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtest: dropping database %s: %w", name, err)
	}
	return nil
}

// withDatabase returns connection string cs (a URL or keyword/value
// string) pointed at database name.
func withDatabase(cs, name string) (string, error) {
	if strings.HasPrefix(cs, "postgres://") || strings.HasPrefix(cs, "postgresql://") {
		u, err := url.Parse(cs)
		if err != nil {
			return "", fmt.Errorf("pgtest: parsing database URL: %w", err)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	// In keyword/value strings a later setting overrides an earlier one.
	return strings.TrimSpace(cs) + " dbname=" + name, nil
}

// WithParams returns the connection string cs (a URL, as URL returns, or
// keyword/value settings) with the settings params, given in URL query
// form ("a=1&b=2"; a leading "&" is ignored), added or replacing those of
// the same names. Tests add settings through it rather than appending to
// cs, which may or may not have a query string already
// (READPAST_DATABASE_URL is the user's).
func WithParams(cs, params string) (string, error) {
	add, err := url.ParseQuery(params)
	if err != nil {
		return "", fmt.Errorf("pgtest: parameters %q: %w", params, err)
	}
	if strings.HasPrefix(cs, "postgres://") || strings.HasPrefix(cs, "postgresql://") {
		u, err := url.Parse(cs)
		if err != nil {
			return "", fmt.Errorf("pgtest: parsing database URL: %w", err)
		}
		q := u.Query()
		for k, vs := range add {
			q[k] = vs
		}
		// Spaces as %20, not +: pgx reads "+" as itself (Encode writes a
		// literal + as %2B, so every + here is a space).
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String(), nil
	}
	// In keyword/value strings a later setting overrides an earlier one.
	var b strings.Builder
	b.WriteString(strings.TrimSpace(cs))
	for _, k := range slices.Sorted(maps.Keys(add)) {
		v := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(add.Get(k))
		fmt.Fprintf(&b, " %s='%s'", k, v)
	}
	return b.String(), nil
}

// shared is the server URL starts for this test binary.
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// sharedServer starts the shared server on first use. A failed start is
// remembered, so every later caller gets the same error quickly.
func sharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = Start(context.Background(), Options{})
	}
	return shared.srv, shared.err
}

// Main runs the tests and then stops the shared server if URL started one.
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Without it the shared server still dies with the test binary, but its
// temporary directory is left behind.
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	srv := shared.srv
	shared.srv, shared.err = nil, errors.New("pgtest: the shared server was stopped by Main")
	shared.mu.Unlock()
	if srv != nil {
		for _, d := range srv.Deadlocks() {
			fmt.Fprintf(os.Stderr, "pgtest: the shared server broke a deadlock:\n%s\n", d)
		}
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping the shared server: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL returns the URL of a fresh empty database for this test, dropped when
// the test ends. The database is on the server READPAST_DATABASE_URL
// points at (created through that connection, which must be allowed to
// CREATE DATABASE) if it is set, else on a server shared by the test binary,
// started on first use. When no PostgreSQL binaries are found the test is
// skipped, or fails if CI=true.
func URL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv("READPAST_DATABASE_URL")
	if admin == "" {
		srv, err := sharedServer()
		if err != nil {
			unavailable(t, err)
			return ""
		}
		admin = srv.URL("postgres")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := createDatabase(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, admin, name); err != nil {
			t.Logf("%v", err)
		}
	})
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// unavailable ends tb because PostgreSQL could not be started: a skip when
// the binaries are missing outside CI, a failure otherwise.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoBinaries) && !InCI() {
		tb.Skipf("%v; install the PostgreSQL server, or set READPAST_PG_BINDIR or READPAST_DATABASE_URL", err)
	} else {
		tb.Fatalf("%v", err)
	}
}

// InCI reports whether the CI environment variable is set to true: there,
// a test that lacks what it needs fails instead of skipping.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// FakeTimeEnv returns the environment (Options.Env) that runs a server
// with its clock off this host's by offset, a libfaketime FAKETIME value
// ("-0.05": 50 ms behind, "+5m"), through Debian's libfaketime (package
// libfaketime). Without it the test is skipped, and fails under CI.
func FakeTimeEnv(t testing.TB, offset string) []string {
	t.Helper()
	m, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(m) == 0 {
		err := "libfaketime.so.1 not found under /usr/lib/*/faketime (apt-get install libfaketime)"
		if InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return []string{"LD_PRELOAD=" + m[0], "FAKETIME=" + offset, "DONT_FAKE_MONOTONIC=1"}
}
