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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// Options configures Start.
type Options struct {
	// Durable keeps fsync, synchronous_commit and full_page_writes on, as in
	// production (for benchmarks). By default they are off for speed. Note
	// that with synchronous_commit off a commit acknowledged just before
	// Kill may be lost; fault tests that expect acknowledged commits to
	// survive a Kill should set Durable (or SET synchronous_commit = on in
	// their sessions).
	Durable bool
	// Logf, if set, receives progress messages (such as testing.T.Logf).
	Logf func(string, ...any)
}

// Server is a PostgreSQL server started from the installed binaries for tests.
// Its methods may be called from several goroutines.
type Server struct {
	opts    Options
	bindir  string
	dir     string // temporary directory holding everything below
	dataDir string
	sockDir string // dir unless its path is too long for a Unix socket
	logPath string
	cred    *syscall.Credential // nil: run as the current user
	port    int                 // fixed once Start returns

	mu      sync.Mutex // serializes Stop, Shutdown, Kill and Restart
	cur     *run       // most recent postmaster, nil before the first launch
	removed bool       // Stop removed the directories
}

// run is one postmaster process.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited and been reaped
	err  error         // cmd.Wait's result, valid once done is closed
}

func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Start runs initdb into a new temporary directory and starts postgres on
// 127.0.0.1 and a free port, returning once it accepts connections. When no
// binaries are found the error wraps ErrNoBinaries. The server runs until
// Stop (or until the test binary exits: it is started with a parent-death
// signal); ctx bounds only the start.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bindir, err := findBinDir(os.Getenv)
	if err != nil {
		return nil, err
	}
	cred, err := childCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "readpast-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{
		opts:    opts,
		bindir:  bindir,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		sockDir: dir,
		logPath: filepath.Join(dir, "postgres.log"),
		cred:    cred,
	}
	started := false
	defer func() {
		if !started {
			_ = s.Stop()
		}
	}()

	// A Unix socket path is limited to 107 bytes on Linux.
	if len(dir)+len("/.s.PGSQL.65535.lock") > 100 {
		if s.sockDir, err = os.MkdirTemp("/tmp", "pgs"); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	for _, d := range []string{s.dir, s.sockDir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: %w", err)
			}
		}
	}

	if err := s.initdb(ctx); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		err = s.launch(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			return nil, err
		}
		s.logf("pgtest: port %d was taken, retrying on another", s.port)
	}
	started = true
	return s, nil
}

// URL returns a postgres:// URL for database dbname on this server, as the
// superuser postgres (trust authentication, no TLS).
func (s *Server) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, url.PathEscape(dbname))
}

// Port returns the TCP port the server listens on; it stays the same
// across Restart.
func (s *Server) Port() int { return s.port }

// Pid returns the pid of the postmaster most recently started, which may
// have exited since.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.cmd.Process.Pid
}

// LogPath returns the file the server's log goes to.
func (s *Server) LogPath() string { return s.logPath }

// CreateDatabase creates a fresh empty database with a unique name and
// returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name, err := createDatabase(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	return s.URL(name), nil
}

// Stop shuts the server down (fast shutdown: SIGINT to the postmaster we
// started), waits for it to exit, and removes the temporary directory. It
// falls back to Kill if the shutdown takes more than a minute. Stop may be
// called after Kill or Shutdown and more than once; the server cannot be
// restarted after it.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.cur != nil && !s.cur.exited() {
		errs = append(errs, s.shutdown(s.cur))
	}
	if !s.removed {
		s.removed = true
		errs = append(errs, os.RemoveAll(s.dir))
		if s.sockDir != s.dir {
			errs = append(errs, os.RemoveAll(s.sockDir))
		}
	}
	return errors.Join(errs...)
}

// Shutdown is Stop without removing the data directory: the server can be
// started again with Restart.
func (s *Server) Shutdown() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.exited() {
		return nil
	}
	return s.shutdown(s.cur)
}

// Kill simulates a crash: it sends SIGKILL to the postmaster and to every
// process descended from it (found through /proc by parent pid, while the
// postmaster is stopped so it cannot fork more), and waits until they are
// gone. The data directory is kept for Restart, which runs crash recovery.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.exited() {
		return errors.New("pgtest: Kill: server is not running")
	}
	return s.kill(s.cur)
}

// Restart starts the server again on the same data directory and port after
// Kill or Shutdown, and waits until it accepts connections.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.removed:
		return errors.New("pgtest: Restart: the server was stopped and its directory removed (use Shutdown or Kill to keep it)")
	case s.cur != nil && !s.cur.exited():
		return errors.New("pgtest: Restart: server is still running")
	}
	return s.launch(ctx)
}

// initdb creates the cluster in s.dataDir.
func (s *Server) initdb(ctx context.Context) error {
	cmd := s.command(ctx, filepath.Join(s.bindir, "initdb"),
		"-D", s.dataDir, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, tail(out.Bytes()))
	}
	return nil
}

// errPortTaken marks a start that failed because the port got taken.
var errPortTaken = errors.New("pgtest: port already in use")

// launch starts the postmaster on s.port and waits until it is ready. The
// caller holds s.mu or is Start.
func (s *Server) launch(ctx context.Context) error {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logf.Close()
	offset, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	args := []string{
		"-D", s.dataDir,
		"-p", strconv.Itoa(s.port),
		"-k", s.sockDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
	}
	if !s.opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	// Not CommandContext: ctx bounds the start, not the server's life.
	cmd := s.command(context.Background(), filepath.Join(s.bindir, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	s.cur = r

	if err := s.waitReady(ctx, r); err != nil {
		if !r.exited() {
			_ = s.kill(r)
		}
		log := s.logSince(offset)
		if bytes.Contains(log, []byte("Address already in use")) {
			return fmt.Errorf("%w: %d", errPortTaken, s.port)
		}
		return fmt.Errorf("pgtest: postgres (pid %d, port %d) did not start: %w\n--- %s ---\n%s",
			cmd.Process.Pid, s.port, err, s.logPath, tail(log))
	}
	s.logf("pgtest: postgres pid %d listening on 127.0.0.1:%d, data in %s", cmd.Process.Pid, s.port, s.dataDir)
	return nil
}

// waitReady polls until the server r accepts connections, r exits, or ctx
// (capped at readyTimeout) ends.
func (s *Server) waitReady(ctx context.Context, r *run) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// Abandon a connection attempt as soon as the server exits.
	go func() {
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-r.done:
			return fmt.Errorf("postgres exited: %v", r.err)
		case <-ctx.Done():
			if r.exited() {
				return fmt.Errorf("postgres exited: %v", r.err)
			}
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping connects once and checks that the server answering is ours, not
// another one that got our port.
func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		return err
	}
	if filepath.Clean(dataDir) != filepath.Clean(s.dataDir) {
		return fmt.Errorf("port %d is served from %s, not %s", s.port, dataDir, s.dataDir)
	}
	return nil
}

// shutdown asks r for a fast shutdown and waits, killing it on timeout.
func (s *Server) shutdown(r *run) error {
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil && !r.exited() {
		return fmt.Errorf("pgtest: signalling postgres: %w", err)
	}
	select {
	case <-r.done:
	case <-time.After(stopTimeout):
		kerr := s.kill(r)
		return errors.Join(fmt.Errorf("pgtest: postgres pid %d did not shut down within %v; killed it", r.cmd.Process.Pid, stopTimeout), kerr)
	}
	if r.err != nil {
		return fmt.Errorf("pgtest: postgres pid %d: %w\n--- %s ---\n%s", r.cmd.Process.Pid, r.err, s.logPath, tail(s.logSince(0)))
	}
	s.logf("pgtest: postgres pid %d stopped", r.cmd.Process.Pid)
	return nil
}

// kill SIGKILLs r and its descendants and waits until they are gone.
func (s *Server) kill(r *run) error {
	pid := r.cmd.Process.Pid
	// Stop the postmaster first so that it forks no new children between
	// the listing and the kill.
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err == nil {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			if st, ok := readStat(pid); !ok || st.state == 'T' || st.state == 'Z' {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	kids := descendants(pid)
	for _, k := range kids {
		_ = syscall.Kill(k.pid, syscall.SIGKILL)
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(reapTimeout):
		return fmt.Errorf("pgtest: postgres pid %d did not exit after SIGKILL", pid)
	}
	// Killed children are reparented and reaped by init (or stay zombies,
	// which hold nothing); wait until none is running.
	deadline := time.Now().Add(reapTimeout)
	for _, k := range kids {
		for !k.gone() {
			if time.Now().After(deadline) {
				return fmt.Errorf("pgtest: process %d (child of postgres pid %d) survived SIGKILL", k.pid, pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	s.logf("pgtest: killed postgres pid %d and %d children", pid, len(kids))
	return nil
}

// command prepares bin to run as the server's user, dying with the test binary.
func (s *Server) command(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf(format, args...)
	}
}

// logSince returns the server log from byte offset on.
func (s *Server) logSince(offset int64) []byte {
	f, err := os.Open(s.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// tail returns the last logTailBytes of b, starting at a line.
func tail(b []byte) []byte {
	if len(b) <= logTailBytes {
		return b
	}
	b = b[len(b)-logTailBytes:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return b
}

// childEnv is the environment without settings that would change what
// initdb and postgres do, in the C locale so log messages are in English.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// findBinDir locates the directory holding initdb and postgres: the
// READPAST_PG_BINDIR environment variable (if set, it is the only place
// looked at), then `pg_config --bindir`, then the highest version under
// /usr/lib/postgresql, then PATH. Failures wrap ErrNoBinaries.
func findBinDir(getenv func(string) string) (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := getenv("READPAST_PG_BINDIR"); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w: READPAST_PG_BINDIR=%s has no initdb and postgres", ErrNoBinaries, dir)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w (looked at READPAST_PG_BINDIR, pg_config --bindir, /usr/lib/postgresql/*/bin and PATH)", ErrNoBinaries)
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths by version.
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, ea := strconv.Atoi(va[i])
		nb, eb := strconv.Atoi(vb[i])
		if ea != nil || eb != nil {
			if va[i] != vb[i] {
				return va[i] < vb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}

// childCredential is who initdb and postgres run as: nil (ourselves) unless
// we are root, then the postgres user if it exists, else nobody.
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			errs = append(errs, fmt.Errorf("user %s has a non-numeric uid or gid", name))
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("pgtest: running as root and no unprivileged user to run PostgreSQL as: %w", errors.Join(errs...))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc identifies a process by pid and start time, so that a reused pid is
// not mistaken for it.
type proc struct {
	pid   int
	start string
}

// procStat is what we read from /proc/PID/stat.
type procStat struct {
	state byte
	ppid  int
	start string
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
	return procStat{state: f[0][0], ppid: ppid, start: f[19]}, true
}

// gone reports whether p has exited (a zombie counts as exited).
func (p proc) gone() bool {
	st, ok := readStat(p.pid)
	return !ok || st.start != p.start || st.state == 'Z' || st.state == 'X'
}

// descendants lists the processes below pid, found through /proc.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(p); ok {
			children[st.ppid] = append(children[st.ppid], proc{pid: p, start: st.start})
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

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
	if errors.Is(err, ErrNoBinaries) && !inCI() {
		tb.Skipf("%v; install the PostgreSQL server, or set READPAST_PG_BINDIR or READPAST_DATABASE_URL", err)
	} else {
		tb.Fatalf("%v", err)
	}
}

// inCI reports whether the CI environment variable is set to true.
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}
