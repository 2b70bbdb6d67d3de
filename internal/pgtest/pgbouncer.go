package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPgBouncer reports that the pgbouncer binary was not found.
// PgBouncerURL-style helpers skip on it unless CI=true.
var ErrNoPgBouncer = errors.New("pgtest: pgbouncer not found (Debian: apt-get install pgbouncer)")

// PgBouncer is a PgBouncer started for tests in front of a Server, in
// transaction pooling mode, on 127.0.0.1 and a free port. Every database
// of the server is reachable through it under its own name.
type PgBouncer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	logf func(string, ...any)
}

// PgBouncerOptions configures StartPgBouncer.
type PgBouncerOptions struct {
	// PoolSize is default_pool_size: server connections per database and
	// user. Defaults to 20.
	PoolSize int
	// Logf, if set, receives progress messages.
	Logf func(string, ...any)
}

// findPgBouncer locates pgbouncer: READPAST_PGBOUNCER, then PATH, then
// Debian's /usr/sbin.
func findPgBouncer() (string, error) {
	if p := os.Getenv("READPAST_PGBOUNCER"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNoPgBouncer
}

// StartPgBouncer starts PgBouncer in transaction pooling mode in front of
// s (trust authentication as user postgres), and returns once it passes
// a query through. It runs as the same unprivileged user as the server
// when the test binary runs as root (PgBouncer refuses root), dies with
// the test binary, and is stopped by pid with Stop.
func StartPgBouncer(ctx context.Context, s *Server, opts PgBouncerOptions) (*PgBouncer, error) {
	bin, err := findPgBouncer()
	if err != nil {
		return nil, err
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 20
	}
	dir, err := os.MkdirTemp("", "readpast-pgbouncer-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	b := &PgBouncer{dir: dir, logf: opts.Logf}
	ok := false
	defer func() {
		if !ok {
			_ = b.Stop()
		}
	}()
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	for attempt := 1; ; attempt++ {
		if b.port, err = freePort(); err != nil {
			return nil, err
		}
		err = b.launch(ctx, bin, s, opts)
		if err == nil {
			break
		}
		if attempt == portAttempts {
			return nil, err
		}
		b.log("pgtest: pgbouncer on port %d: %v; retrying on another port", b.port, err)
	}
	ok = true
	return b, nil
}

func (b *PgBouncer) launch(ctx context.Context, bin string, s *Server, opts PgBouncerOptions) error {
	conf := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = transaction
default_pool_size = %d
max_client_conn = 2000
max_db_connections = 0
ignore_startup_parameters = extra_float_digits
logfile = %s
`, s.port, b.port, filepath.Join(b.dir, "users.txt"), opts.PoolSize, filepath.Join(b.dir, "pgbouncer.log"))
	path := filepath.Join(b.dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := exec.Command(bin, path)
	cmd.Dir = b.dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting pgbouncer: %w", err)
	}
	b.cmd, b.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(b.done)
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := b.ping(wctx)
		if err == nil {
			b.log("pgtest: pgbouncer pid %d on 127.0.0.1:%d in front of port %d", cmd.Process.Pid, b.port, s.port)
			return nil
		}
		select {
		case <-b.done:
			log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
			return fmt.Errorf("pgtest: pgbouncer exited: %v\n%s", cmd.ProcessState, tail(log))
		case <-wctx.Done():
			_ = b.Stop()
			return fmt.Errorf("pgtest: pgbouncer did not pass a query within 30 s: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *PgBouncer) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.URL("postgres")+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "SELECT 1")
	return err
}

func (b *PgBouncer) log(format string, args ...any) {
	if b.logf != nil {
		b.logf(format, args...)
	}
}

// URL is a postgres:// URL for database dbname through PgBouncer. Add
// the readpast settings a pooler needs (see docs/faults.md).
func (b *PgBouncer) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.port, url.PathEscape(dbname))
}

// Port is the port PgBouncer listens on.
func (b *PgBouncer) Port() int { return b.port }

// Pid is PgBouncer's process id.
func (b *PgBouncer) Pid() int {
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Stop stops PgBouncer (SIGINT, its immediate shutdown, then SIGKILL after
// 10 s) by pid and removes its directory.
func (b *PgBouncer) Stop() error {
	var err error
	if b.cmd != nil {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-b.done:
			case <-time.After(10 * time.Second):
				_ = b.cmd.Process.Kill()
				<-b.done
				err = fmt.Errorf("pgtest: pgbouncer pid %d ignored SIGINT; killed", b.cmd.Process.Pid)
			}
		}
	}
	return errors.Join(err, os.RemoveAll(b.dir))
}

// PgBouncerFor starts a PgBouncer in front of s for the test, stopped at
// its end. Without the binary the test is skipped, or fails if CI=true.
func PgBouncerFor(t testing.TB, s *Server) *PgBouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := StartPgBouncer(ctx, s, PgBouncerOptions{Logf: t.Logf})
	if err != nil {
		if errors.Is(err, ErrNoPgBouncer) && !InCI() {
			t.Skipf("%v", err)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// ServerFor starts a server of its own for the test with opts, stopped at
// its end. Without the binaries the test is skipped, or fails if CI=true.
func ServerFor(t testing.TB, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	s, err := Start(ctx, opts)
	if err != nil {
		unavailable(t, err)
		return nil
	}
	t.Cleanup(func() {
		for _, d := range s.Deadlocks() {
			t.Logf("pgtest: the server broke a deadlock:\n%s", d)
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}
