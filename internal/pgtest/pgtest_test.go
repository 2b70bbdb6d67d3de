package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// connect opens a connection closed when the test ends.
func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

func TestServerLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := Start(ctx, Options{Logf: t.Logf})
	if err != nil {
		unavailable(t, err)
		return
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})

	url1, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url2, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if url1 == url2 {
		t.Fatalf("CreateDatabase returned %s twice", url1)
	}

	c1 := connect(t, ctx, url1)
	// A committed row must survive Kill; with synchronous_commit off (the
	// default Options) only a synchronous commit is guaranteed to.
	if _, err := c1.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	c2 := connect(t, ctx, url2)
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table created in %s is visible in %s", url1, url2)
	}

	// Kill takes the postmaster and its backends (c1 and c2 have one each).
	pid := srv.Pid()
	kids := descendants(pid)
	if len(kids) < 2 {
		t.Fatalf("postmaster %d has %d descendants, want at least the two backends", pid, len(kids))
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("postmaster %d still exists after Kill", pid)
	}
	for _, k := range kids {
		if !k.gone() {
			t.Fatalf("child %d of the postmaster still runs after Kill", k.pid)
		}
	}
	if err := srv.Kill(); err == nil {
		t.Fatal("Kill of a killed server succeeded")
	}
	if err := c1.Ping(ctx); err == nil {
		t.Fatal("connection still works after Kill")
	}

	port := srv.Port()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Pid() == pid || srv.Port() != port {
		t.Fatalf("after Restart pid %d port %d, before pid %d port %d", srv.Pid(), srv.Port(), pid, port)
	}
	if err := srv.Restart(ctx); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	var v string
	if err := connect(t, ctx, url1).QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != "kept" {
		t.Fatalf("after Restart: %q, %v; want kept", v, err)
	}

	// Shutdown keeps the directory, so the server can come back once more,
	// once its port is free again.
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); !errors.Is(err, errPortTaken) {
		t.Fatalf("Restart on a taken port: %v, want errPortTaken", err)
	}
	l.Close()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, ctx, url2).Ping(ctx); err != nil {
		t.Fatal(err)
	}

	pid = srv.Pid()
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("postmaster %d still exists after Stop", pid)
	}
	if _, err := os.Stat(srv.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists after Stop: %v", srv.dir, err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := srv.Restart(ctx); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestURL(t *testing.T) {
	ctx := context.Background()
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("URL returned %s twice", a)
	}
	for _, u := range []string{a, b} {
		var db string
		if err := connect(t, ctx, u).QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s -> %s", u, db)
	}
}

// TestURLFromEnv points READPAST_DATABASE_URL at the shared server and
// checks that the database URL creates is dropped when its test ends.
func TestURLFromEnv(t *testing.T) {
	if os.Getenv("READPAST_DATABASE_URL") == "" {
		srv, err := sharedServer()
		if err != nil {
			unavailable(t, err)
			return
		}
		t.Setenv("READPAST_DATABASE_URL", srv.URL("postgres"))
	}
	ctx := context.Background()
	var db string
	t.Run("sub", func(t *testing.T) {
		u := URL(t)
		if err := connect(t, ctx, u).QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	admin := connect(t, ctx, os.Getenv("READPAST_DATABASE_URL"))
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if db == "" || n != 0 {
		t.Fatalf("database %q: %d left after its test ended", db, n)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:p@h:5/old?sslmode=disable", "postgres://u:p@h:5/new?sslmode=disable"},
		{"postgresql://h", "postgresql://h/new"},
		{"host=h dbname=old ", "host=h dbname=old dbname=new"},
	} {
		got, err := withDatabase(c.in, "new")
		if err != nil || got != c.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestFindBinDir(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	_, err := findBinDir(env(map[string]string{"READPAST_PG_BINDIR": "/nonexistent"}))
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("READPAST_PG_BINDIR=/nonexistent: %v, want ErrNoBinaries", err)
	}

	dir := t.TempDir()
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := findBinDir(env(map[string]string{"READPAST_PG_BINDIR": dir})); err != nil || got != dir {
		t.Fatalf("READPAST_PG_BINDIR=%s: %q, %v", dir, got, err)
	}
	if err := os.Chmod(filepath.Join(dir, "postgres"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinDir(env(map[string]string{"READPAST_PG_BINDIR": dir})); !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("non-executable postgres: %v, want ErrNoBinaries", err)
	}
}

func TestVersionLess(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/10/bin"}
	if !versionLess(dirs[0], dirs[2]) || !versionLess(dirs[2], dirs[1]) || versionLess(dirs[1], dirs[2]) {
		t.Fatal("versions misordered")
	}
}

// fakeTB records how unavailable ends a test.
type fakeTB struct {
	testing.TB
	how string
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.how = "skip" }
func (f *fakeTB) Fatalf(string, ...any) { f.how = "fatal" }
func (f *fakeTB) Fatal(...any)          { f.how = "fatal" }

func TestUnavailable(t *testing.T) {
	missing := fmt.Errorf("%w: test", ErrNoBinaries)
	for _, c := range []struct {
		ci   string
		err  error
		want string
	}{
		{"", missing, "skip"},
		{"false", missing, "skip"},
		{"true", missing, "fatal"},
		{"", errors.New("initdb failed"), "fatal"},
	} {
		t.Setenv("CI", c.ci)
		f := &fakeTB{TB: t}
		unavailable(f, c.err)
		if f.how != c.want {
			t.Errorf("CI=%q, %v: %s, want %s", c.ci, c.err, f.how, c.want)
		}
	}
}

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{
		"true": true, "1": true, "TRUE": true, "True": true, "t": true,
		"": false, "false": false, "0": false, "no": false,
	} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("InCI() with CI=%q = %v, want %v", v, got, want)
		}
	}
}
