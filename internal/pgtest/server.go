package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
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
	// Settings are more server settings, "name=value" each, passed as -c
	// after the defaults so that they override them (for example
	// "synchronous_commit=on", which makes an acknowledged commit survive
	// Kill without the cost of fsync).
	Settings []string
	// Env is added to the environment of initdb and postgres (for example
	// LD_PRELOAD and FAKETIME for libfaketime).
	Env []string
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
	return start(ctx, opts, func(s *Server) error { return s.initdb(ctx) })
}

// start prepares a new server's directories, fills its data directory
// with create, and launches it on a free port.
func start(ctx context.Context, opts Options, create func(*Server) error) (*Server, error) {
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

	if err := create(s); err != nil {
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
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
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
	cmd.Env = append(childEnv(), s.opts.Env...)
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
