package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestE2E builds the readpast binary and drives every HTTP endpoint and CLI
// verb against a real server, on SQLite and on PostgreSQL.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "readpast")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("sqlite", func(t *testing.T) {
		runE2E(t, bin, filepath.Join(t.TempDir(), "e2e.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		// Trust authentication ignores the password: it is there to check
		// that it is never shown.
		runE2E(t, bin, strings.Replace(pgtest.URL(t), "postgres@", "postgres:"+pgPassword+"@", 1))
	})
	t.Run("auth off", func(t *testing.T) {
		runAuthOff(t, bin, filepath.Join(t.TempDir(), "off.db"))
	})
	t.Run("nothing created", func(t *testing.T) { runNothingCreated(t, bin) })
	t.Run("read-only folder", func(t *testing.T) { runReadOnlyFolder(t, bin) })
}

// runNothingCreated: commands that read, run in an empty folder or pointed
// at a path that does not exist, fail with a message that names what is
// missing and leave no file, directory or schema behind. (They used to
// create a migrated database and print zeros.)
func runNothingCreated(t *testing.T, bin string) {
	empty := t.TempDir()
	missing := filepath.Join(empty, "nonexist", "dir", "x.db")
	for _, args := range [][]string{{"stats"}, {"jobs", "list"}, {"jobs", "show", "1"}, {"migrate", "status"}} {
		r := runCLIIn(t, bin, empty, nil, "", append(args, "--database-url", missing)...)
		name := strings.Join(args[:min(2, len(args))], " ")
		if args[0] == "migrate" {
			name = "migrate"
		}
		if r.code != 1 || r.stderr != fmt.Sprintf("readpast %s: no database at %s", name, missing)+
			map[bool]string{true: " ('readpast migrate --database-url " + missing + "' creates it)\n",
				false: ": check the path, or create it with 'readpast migrate --database-url " + missing + "' (or 'readpast serve')\n"}[args[0] == "migrate"] {
			t.Errorf("readpast %v --database-url %s: exit %d, stderr %q", args, missing, r.code, r.stderr)
		}
	}
	// Without --database-url the job commands ask a server: none listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"stats"}, {"jobs", "list"}, {"enqueue", "--kind", "a"}} {
		r := runCLIIn(t, bin, empty, []string{"READPAST_URL=" + closed}, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the readpast server at "+closed) || !strings.Contains(r.stderr, "'readpast serve'") {
			t.Errorf("readpast %v with no server: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := runCLIIn(t, bin, empty, nil, "", "migrate", "status")
	if r.code != 1 || !strings.Contains(r.stderr, "no database at "+filepath.Join(empty, "readpast.db")) {
		t.Errorf("migrate status in an empty folder: exit %d, stderr %q", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("the commands left %v behind", entries)
	}

	// A database migrated by a newer readpast: serve refuses it, with or
	// without --no-migrate.
	db := filepath.Join(t.TempDir(), "newer.db")
	mustCLI(t, bin, "", "migrate", "--database-url", db)
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, latest, err := s.SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`INSERT INTO readpast_schema_migrations (version, applied_at) VALUES (?, 0)`, latest+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, extra := range [][]string{nil, {"--no-migrate"}} {
		r := runCLI(t, bin, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", db}, extra...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "newer") {
			t.Errorf("serve %v on a newer database: exit %d, stderr %q", extra, r.code, r.stderr)
		}
	}
}

// runReadOnlyFolder: a database in a folder the user cannot write to can
// be inspected, and commands that would write say which folder is the
// problem. (It used to be "sqlite: enable WAL: unable to open database
// file (14)", with no path, for every command.) As root, whom permissions
// do not bind, the commands run as nobody.
func runReadOnlyFolder(t *testing.T, bin string) {
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Skipf("no unprivileged user to run as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Folders the unprivileged user can reach (t.TempDir's are private).
	base, err := os.MkdirTemp("", "readpast-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "ro"), 0o755); os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(base, "readpast")
	if b, err := os.ReadFile(bin); err != nil || os.WriteFile(exe, b, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	dir := filepath.Join(base, "ro")
	db := filepath.Join(dir, "jobs.db")
	mustCLI(t, bin, "", "migrate", "--database-url", db)
	s, err := sqlite.Open(context.Background(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k", Queue: "roq"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, p := range []string{dir, db} {
		if err := os.Chmod(p, map[bool]os.FileMode{true: 0o555, false: 0o644}[p == dir]); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) cliResult {
		cmd := exec.Command(exe, args...)
		cmd.Dir = base
		cmd.Env = childEnv()
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return cliResult{stdout.String(), stderr.String(), code}
	}
	if r := run("stats", "--database-url", db); r.code != 0 || !strings.Contains(r.stdout, "roq") {
		t.Errorf("stats in a read-only folder: %+v", r)
	}
	if r := run("jobs", "list", "--database-url", db); r.code != 0 || !strings.Contains(r.stdout, "roq") {
		t.Errorf("jobs list in a read-only folder: %+v", r)
	}
	if r := run("migrate", "status", "--database-url", db); r.code != 0 || !strings.Contains(r.stdout, "up to date") {
		t.Errorf("migrate status in a read-only folder: %+v", r)
	}
	want := fmt.Sprintf("the folder %q is not writable", dir)
	for _, args := range [][]string{
		{"jobs", "cancel", "1", "--database-url", db},
		{"enqueue", "--kind", "k", "--database-url", db},
		{"serve", "--addr", "127.0.0.1:0", "--database-url", db},
		{"serve", "--addr", "127.0.0.1:0", "--database-url", filepath.Join(dir, "new.db")},
	} {
		if r := run(args...); r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("readpast %v in a read-only folder: exit %d, stderr %q, want %q", args, r.code, r.stderr, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the read-only folder holds %v", entries)
	}
}

// runAuthOff checks that a server without tokens answers curl and workers
// on loopback but not web pages: cross-origin writes and requests for other
// Host names (DNS rebinding) are refused.
func runAuthOff(t *testing.T, bin, db string) {
	srv := startServer(t, bin, nil, "--database-url", db, "--allowed-host", "queue.test")
	send := func(method, path, body, host string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// What curl -d sends.
	curl := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "curl/8.5.0"}
	if st, b := send("POST", "/v1/jobs", `{"kind":"a"}`, "", curl); st != 201 {
		t.Errorf("curl -d: %d %s", st, b)
	}
	if st, b := send("POST", "/v1/jobs", `{"kind":"a"}`, "queue.test:80", curl); st != 201 {
		t.Errorf("curl -d to an --allowed-host: %d %s", st, b)
	}
	if st, b := send("POST", "/v1/jobs", `{"kind":"evil"}`, "", map[string]string{
		"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); st != 403 || !strings.Contains(b, `"cross_origin"`) {
		t.Errorf("cross-origin POST: %d %s", st, b)
	}
	for _, m := range []string{"GET", "POST"} {
		if st, b := send(m, "/v1/jobs", `{"kind":"evil"}`, "evil.example", nil); st != 403 || !strings.Contains(b, `"host_not_allowed"`) {
			t.Errorf("%s with Host evil.example: %d %s", m, st, b)
		}
	}
	var stats struct{ Totals map[string]int }
	st, b := send("GET", "/v1/stats", "", "", nil)
	if err := json.Unmarshal([]byte(b), &stats); st != 200 || err != nil || stats.Totals["pending"] != 2 {
		t.Errorf("stats after the refused requests: %d %s", st, b)
	}
	srv.stop(t)
}

// pgPassword is put in the PostgreSQL URL the end-to-end test gives the
// server, to check that logs and messages never show it.
const pgPassword = "pw-Zm9vYmFy"

// childEnv is the environment for the binary and the worker: ours without
// readpast's own variables, plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "READPAST_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// cliResult is what one run of the binary did.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary with args and stdin, and returns its output and
// exit code.
func runCLI(t *testing.T, bin, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLIIn(t, bin, "", nil, stdin, args...)
}

// runCLIEnv is runCLI with extra environment variables.
func runCLIEnv(t *testing.T, bin string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	return runCLIIn(t, bin, "", env, stdin, args...)
}

// mustCLIEnv is mustCLI with extra environment variables.
func mustCLIEnv(t *testing.T, bin string, env []string, stdin string, args ...string) string {
	t.Helper()
	r := runCLIEnv(t, bin, env, stdin, args...)
	if r.code != 0 {
		t.Fatalf("readpast %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// runCLIIn runs the binary in dir (the test's working directory when
// empty) with extra environment variables, args and stdin.
func runCLIIn(t *testing.T, bin, dir string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("readpast %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

// mustCLI runs the binary and requires exit code 0.
func mustCLI(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	r := runCLI(t, bin, stdin, args...)
	if r.code != 0 {
		t.Fatalf("readpast %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running `readpast serve`.
type server struct {
	cmd  *exec.Cmd
	base string
	log  *lockedBuffer
	done chan error
	// listening is the "listening" log record.
	listening map[string]any
}

// startServer starts `readpast serve` on a free loopback port and waits
// until it listens.
func startServer(t *testing.T, bin string, env []string, args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = childEnv(env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, log: &lockedBuffer{}, done: make(chan error, 1)}
	listening := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.log, line)
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "listening" {
				listening <- rec
			}
		}
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
	})
	select {
	case rec := <-listening:
		s.listening = rec
		s.base = fmt.Sprint("http://", rec["addr"])
	case err := <-s.done:
		t.Fatalf("readpast serve exited: %v\n%s", err, s.log.String())
	case <-time.After(time.Minute):
		t.Fatalf("readpast serve did not start\n%s", s.log.String())
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("readpast serve exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("readpast serve did not stop after SIGTERM")
	}
}

// client sends API requests to a server with a token.
type client struct {
	t     *testing.T
	base  string
	token string
}

func (c client) with(token string) client { c.token = token; return c }

// do sends one request and returns the status and body.
func (c client) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// must sends a request, requires status want and decodes the body into out.
func (c client) must(method, path, body string, want int, out any) []byte {
	c.t.Helper()
	status, b := c.do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s %.200s: status %d, want %d: %s", method, path, body, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return b
}

// wantError requires an error response with status, code and field.
func (c client) wantError(method, path, body string, status int, code, field string) {
	c.t.Helper()
	got, b := c.do(method, path, body)
	var e struct {
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	if got != status || json.Unmarshal(b, &e) != nil || e.Error.Code != code || e.Error.Field != field || e.Error.Message == "" {
		c.t.Errorf("%s %s %.200s: got %d %s; want %d code %q field %q", method, path, body, got, b, status, code, field)
	}
}

// job is the part of the wire job the test reads.
type job struct {
	ID             int64           `json:"id"`
	Queue          string          `json:"queue"`
	Kind           string          `json:"kind"`
	Payload        json.RawMessage `json:"payload"`
	State          string          `json:"state"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Group          *string         `json:"group"`
	Errors         []struct{ Message string }
	Result         json.RawMessage `json:"result"`
	Token          string          `json:"token"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	RunAt          time.Time       `json:"run_at"`
}

type jobsBody struct {
	Jobs       []job   `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
}

func runE2E(t *testing.T, bin, db string) {
	// CLI before the server: version and migrations.
	if out := mustCLI(t, bin, "", "version"); !strings.HasPrefix(out, "readpast ") {
		t.Errorf("version = %q", out)
	}
	var ver struct{ Version, GoVersion string }
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", "version", "--json")), &ver); err != nil || ver.Version == "" {
		t.Errorf("version --json: %+v %v", ver, err)
	}
	isSQLite := !strings.HasPrefix(db, "postgres")
	if isSQLite {
		// Nothing reads or serves (without migrating) a database that is
		// not there, and nothing creates it on the way.
		for _, args := range [][]string{
			{"migrate", "status"}, {"stats"}, {"jobs", "list"}, {"jobs", "show", "1"}, {"enqueue", "--kind", "a"},
			{"serve", "--no-migrate", "--addr", "127.0.0.1:0"},
		} {
			r := runCLI(t, bin, "", append(args, "--database-url", db)...)
			if r.code != 1 || !strings.Contains(r.stderr, "no database at "+db) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("readpast %v on a missing database: exit %d, stderr %q", args, r.code, r.stderr)
			}
			if _, err := os.Stat(db); err == nil {
				t.Fatalf("readpast %v created %s", args, db)
			}
		}
		if err := os.WriteFile(db, nil, 0o600); err != nil { // an empty SQLite database
			t.Fatal(err)
		}
	}
	if out := mustCLI(t, bin, "", "migrate", "status", "--database-url", db); !strings.HasPrefix(out, "schema version 0 of ") || !strings.Contains(out, " pending)") {
		t.Errorf("migrate status before migrating = %q", out)
	}
	// An existing database without the schema: read commands and serve
	// --no-migrate refuse and say what to run (serve used to start and
	// answer 500).
	for _, args := range [][]string{{"stats"}, {"jobs", "list"}, {"serve", "--no-migrate", "--addr", "127.0.0.1:0"}} {
		r := runCLI(t, bin, "", append(args, "--database-url", db)...)
		if r.code != 1 || !strings.Contains(r.stderr, "is not migrated (schema version 0 of ") || !strings.Contains(r.stderr, "run 'readpast migrate") {
			t.Errorf("readpast %v on an unmigrated database: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	var ms struct{ Current, Latest, Pending int }
	if out := mustCLI(t, bin, "", "migrate", "up", "--database-url", db); !strings.HasPrefix(out, "migrated the schema from version 0 to ") {
		t.Errorf("migrate up = %q", out)
	}
	if out := mustCLI(t, bin, "", "migrate", "--database-url", db); !strings.HasPrefix(out, "schema was already up to date") {
		t.Errorf("migrate up again = %q", out)
	}
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", "migrate", "status", "--json", "--database-url", db)), &ms); err != nil ||
		ms.Latest < 1 || ms.Current != ms.Latest || ms.Pending != 0 {
		t.Errorf("migrate status --json after migrating: %+v %v", ms, err)
	}
	if out, want := mustCLI(t, bin, "", "migrate", "status", "--database-url", db), fmt.Sprintf("schema version %d of %d (up to date)\n", ms.Latest, ms.Latest); out != want {
		t.Errorf("migrate status after migrating = %q, want %q", out, want)
	}
	if r := runCLI(t, bin, "", "migrate", "sideways", "--database-url", db); r.code != 2 {
		t.Errorf("migrate sideways: exit %d", r.code)
	}
	if r := runCLI(t, bin, "", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("unknown command: %+v", r)
	}
	if r := runCLI(t, bin, "", "serve", "--addr", "0.0.0.0:0", "--database-url", db); r.code != 2 || !strings.Contains(r.stderr, "refusing") {
		t.Errorf("serve on all interfaces without a token: %+v", r)
	}

	srv := startServer(t, bin, []string{"READPAST_TOKENS=env-token-1-0123456789, env-token-2-0123456789"},
		"--database-url", db, "--no-migrate", "--token", "full-token-0123456789", "--read-token", "read-token-0123456789",
		"--max-batch", "50", "--rescue-interval", "100ms")
	api := client{t: t, base: srv.base, token: "full-token-0123456789"}
	anon, ro := api.with(""), api.with("read-token-0123456789")

	// The log says what the server opened, without secrets.
	wantDB := db
	if isSQLite {
		wantDB, _ = filepath.Abs(db)
	} else {
		wantDB = strings.Replace(db, ":"+pgPassword+"@", "@", 1)
	}
	if st, d := srv.listening["store"], srv.listening["database"]; st != map[bool]string{true: "sqlite", false: "postgres"}[isSQLite] || d != wantDB {
		t.Errorf("listening record %v: want store and database %q", srv.listening, wantDB)
	}
	if strings.Contains(srv.log.String(), pgPassword) {
		t.Errorf("the server logged the database password:\n%s", srv.log.String())
	}

	// Health, auth, documents.
	anon.must("GET", "/healthz", "", 200, nil)
	anon.must("GET", "/readyz", "", 200, nil)
	anon.wantError("GET", "/v1/stats", "", 401, "unauthorized", "")
	api.with("nope").wantError("GET", "/v1/stats", "", 401, "unauthorized", "")
	ro.must("GET", "/v1/stats", "", 200, nil)
	ro.wantError("POST", "/v1/jobs", `{"kind":"a"}`, 403, "forbidden", "")
	api.with("env-token-2-0123456789").must("GET", "/v1/stats", "", 200, nil)
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	api.must("GET", "/v1/openapi.json", "", 200, &doc)
	if doc.OpenAPI != "3.1.0" || len(doc.Paths) < 10 {
		t.Errorf("openapi = %s with %d paths", doc.OpenAPI, len(doc.Paths))
	}

	// Enqueue, one and in batches.
	var one job
	api.must("POST", "/v1/jobs", `{"kind":"email","payload":{"to":"x"},"queue":"e2e","priority":-3,"max_attempts":4,"group":"g"}`, 201, &one)
	if one.ID < 1 || one.State != "pending" || one.Queue != "e2e" || one.Group == nil || *one.Group != "g" || one.MaxAttempts != 4 {
		t.Fatalf("enqueued %+v", one)
	}
	var got job
	api.must("GET", fmt.Sprintf("/v1/jobs/%d", one.ID), "", 200, &got)
	if got.ID != one.ID || string(got.Payload) != `{"to":"x"}` {
		t.Errorf("GET job = %+v", got)
	}
	api.wantError("POST", "/v1/jobs", `{"kind":"a","priority":"x"}`, 400, "invalid_field", "priority")
	api.wantError("POST", "/v1/jobs", `{"kind":"a","color":"red"}`, 400, "invalid_field", "color")
	api.wantError("POST", "/v1/jobs", `{"kind":`, 400, "malformed_json", "")
	api.wantError("POST", "/v1/jobs", `{"kind":"a","payload":"`+strings.Repeat("x", 5<<20)+`"}`, 413, "body_too_large", "")
	var batch jobsBody
	api.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"b1","queue":"e2e"},{"kind":"b2","queue":"e2e"},{"kind":"b3","queue":"e2e"}]}`, 201, &batch)
	if len(batch.Jobs) != 3 || batch.Jobs[2].Kind != "b3" {
		t.Fatalf("batch = %+v", batch)
	}
	api.wantError("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"ok","queue":"e2e"},{"kind":"bad","max_attempts":-1}]}`, 400, "invalid_field", "jobs[1].max_attempts")
	big := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"kind":"x"},`, 51), ",") + `]}`
	api.wantError("POST", "/v1/jobs/batch", big, 413, "batch_too_large", "jobs")
	var list jobsBody
	api.must("GET", "/v1/jobs?queue=e2e", "", 200, &list)
	if len(list.Jobs) != 4 {
		t.Errorf("queue e2e holds %d jobs after the rejected requests, want 4", len(list.Jobs))
	}

	// Claim, heartbeat, complete; stale tokens.
	var claimed jobsBody
	api.must("POST", "/v1/claim", `{"worker":"e2e-w","queues":["e2e"],"limit":2,"lease_seconds":30}`, 200, &claimed)
	if len(claimed.Jobs) != 2 || claimed.Jobs[0].ID != one.ID || claimed.Jobs[0].Token == "" || claimed.Jobs[0].LeaseExpiresAt == nil {
		t.Fatalf("claimed %+v", claimed)
	}
	c1, c2 := claimed.Jobs[0], claimed.Jobs[1]
	var hb struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/heartbeat", c1.ID), `{"token":"`+c1.Token+`","lease_seconds":300}`, 200, &hb)
	if time.Until(hb.LeaseExpiresAt) < 200*time.Second {
		t.Errorf("heartbeat lease until %v", hb.LeaseExpiresAt)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/complete", c1.ID), `{"token":"0123456789abcdef0123456789abcdef"}`, 409, "stale_token", "")
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/complete", c1.ID), `{"token":"`+c1.Token+`","result":{"sent":true}}`, 200, &got)
	if got.State != "succeeded" || string(got.Result) != `{"sent":true}` {
		t.Errorf("completed = %+v", got)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/heartbeat", c1.ID), `{"token":"`+c1.Token+`"}`, 409, "stale_token", "")

	// Fail with retry_at now: pending again with the error; then release.
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/fail", c2.ID), `{"token":"`+c2.Token+`","error":"flaky","retry_at":"2001-01-01T00:00:00Z"}`, 200, &got)
	if got.State != "pending" || len(got.Errors) != 1 || got.Errors[0].Message != "flaky" {
		t.Errorf("failed = %+v", got)
	}
	api.must("POST", "/v1/claim", `{"worker":"e2e-w","queues":["e2e"]}`, 200, &claimed)
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != c2.ID || claimed.Jobs[0].Attempt != 2 {
		t.Fatalf("reclaimed %+v", claimed)
	}
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/release", c2.ID), `{"token":"`+claimed.Jobs[0].Token+`"}`, 200, &got)
	if got.State != "pending" {
		t.Errorf("released = %+v", got)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/release", c2.ID), `{"token":"`+claimed.Jobs[0].Token+`"}`, 409, "stale_token", "")

	// Cancel and retry.
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/cancel", c2.ID), "", 200, &got)
	if got.State != "cancelled" {
		t.Errorf("cancelled = %+v", got)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/cancel", c2.ID), "", 409, "invalid_state", "")
	api.must("POST", fmt.Sprintf("/v1/jobs/%d/retry", c2.ID), "{}", 200, &got)
	if got.State != "pending" {
		t.Errorf("retried = %+v", got)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/retry", c1.ID), "", 409, "invalid_state", "")
	api.wantError("GET", "/v1/jobs/987654321", "", 404, "not_found", "")
	api.wantError("POST", "/v1/jobs/987654321/cancel", "", 404, "not_found", "")
	api.wantError("GET", "/v1/jobs/zero", "", 400, "invalid_field", "id")
	api.wantError("GET", "/v1/nothing", "", 404, "not_found", "")

	// Long poll: woken by an enqueue, and empty at the end of the wait.
	woke := make(chan jobsBody, 1)
	start := time.Now()
	go func() {
		var r jobsBody
		_, b := api.do("POST", "/v1/claim", `{"worker":"lp","queues":["longpoll"],"wait_seconds":20}`)
		_ = json.Unmarshal(b, &r)
		woke <- r
	}()
	time.Sleep(300 * time.Millisecond)
	api.must("POST", "/v1/jobs", `{"kind":"lp","queue":"longpoll"}`, 201, &one)
	select {
	case r := <-woke:
		if len(r.Jobs) != 1 || r.Jobs[0].ID != one.ID {
			t.Errorf("long poll got %+v", r)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("long poll took %v", d)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("long poll never returned")
	}
	raw := api.must("POST", "/v1/claim", `{"worker":"lp","queues":["longpoll"],"wait_seconds":0.3}`, 200, nil)
	if strings.TrimSpace(string(raw)) != `{"jobs":[]}` {
		t.Errorf("empty long poll = %s", raw)
	}

	// The server's rescuer ends expired leases.
	api.must("POST", "/v1/jobs", `{"kind":"slow","queue":"rescue"}`, 201, &one)
	api.must("POST", "/v1/claim", `{"worker":"w","queues":["rescue"],"lease_seconds":0.2}`, 200, &claimed)
	if len(claimed.Jobs) != 1 {
		t.Fatalf("claimed %+v", claimed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		api.must("GET", fmt.Sprintf("/v1/jobs/%d", one.ID), "", 200, &got)
		if got.State == "pending" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.State != "pending" {
		t.Errorf("expired lease not rescued: %+v", got)
	}
	api.wantError("POST", fmt.Sprintf("/v1/jobs/%d/complete", one.ID), `{"token":"`+claimed.Jobs[0].Token+`"}`, 409, "stale_token", "")

	// Listing with cursors, stats, metrics.
	var seen int
	path := "/v1/jobs?queue=e2e&limit=3"
	for page := 0; page < 10; page++ {
		ro.must("GET", path, "", 200, &list)
		seen += len(list.Jobs)
		if list.NextCursor == nil {
			break
		}
		path = "/v1/jobs?queue=e2e&limit=3&cursor=" + *list.NextCursor
	}
	if seen != 4 {
		t.Errorf("paged through %d jobs of queue e2e, want 4", seen)
	}
	api.wantError("GET", "/v1/jobs?state=done", "", 400, "invalid_field", "state")
	var stats struct {
		Queues map[string]map[string]int64 `json:"queues"`
	}
	ro.must("GET", "/v1/stats", "", 200, &stats)
	if q := stats.Queues["e2e"]; q["succeeded"] != 1 || q["pending"] != 3 {
		t.Errorf("stats for e2e = %v", q)
	}
	metrics := string(ro.must("GET", "/metrics", "", 200, nil))
	for _, want := range []string{`readpast_jobs_enqueued_total{kind="email",queue="e2e"} 1`, `readpast_jobs_completed_total{kind="email",queue="e2e"} 1`,
		`readpast_queue_jobs{queue="e2e",state="pending"} 3`, "readpast_claim_duration_seconds_bucket", "readpast_schedule_fire_failures_total 0", "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The CLI through the server (--url and --token, or the environment),
	// and directly on the database (--database-url) while the server runs.
	remote := []string{"--url", srv.base, "--token", "full-token-0123456789"}
	remoteEnv := []string{"READPAST_URL=" + srv.base, "READPAST_TOKEN=full-token-0123456789"}
	direct := []string{"--database-url", db}
	var cj job
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "add", "--payload", `{"numbers":[1,2,3]}`, "--queue", "cli", "--priority", "-1", "--json"}, remote...)...)), &cj); err != nil || cj.Kind != "add" || cj.Queue != "cli" {
		t.Fatalf("enqueue --json: %+v %v", cj, err)
	}
	if out := mustCLIEnv(t, bin, remoteEnv, "", "enqueue", "--kind", "plain", "--queue", "cli", "--run-at", "2030-01-01T00:00:00Z", "--max-attempts", "2", "--group", "cg"); !strings.Contains(out, "state:") || !strings.Contains(out, "2030-01-01T00:00:00Z") {
		t.Errorf("enqueue table output = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "direct", "--queue", "cli"}, direct...)...); !strings.Contains(out, "direct") {
		t.Errorf("enqueue --database-url = %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--payload", "{nope"}, "--payload: not valid JSON"},
		{[]string{"--priority", "7777"}, "--priority"},
		// Payloads no store can keep are refused the same way before
		// anything is sent (PostgreSQL used to answer SQLSTATE 22P05).
		{[]string{"--payload", `{"s":"\u0000"}`}, `--payload: contains \u0000`},
		{[]string{"--payload", `"\ud800"`}, "--payload: contains an unpaired UTF-16 surrogate"},
		{[]string{"--payload", "\"\xff\""}, "--payload: not valid UTF-8"},
	} {
		r := runCLI(t, bin, "", append(append([]string{"enqueue", "--kind", "x"}, tc.args...), remote...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "SQLSTATE") {
			t.Errorf("enqueue %v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	lines := `{"kind":"s1","queue":"stdin"}` + "\n\n" + `{"kind":"s2","queue":"stdin","payload":[1]}` + "\n" + `{"kind":"s3","queue":"stdin","priority":5}` + "\n"
	if out := mustCLIEnv(t, bin, remoteEnv, lines, "enqueue", "--stdin"); !strings.Contains(out, "enqueued 3 jobs") {
		t.Errorf("enqueue --stdin = %q", out)
	}
	// More than the server's --max-batch (50) in one go: sent in batches.
	var many strings.Builder
	for i := range 120 {
		fmt.Fprintf(&many, `{"kind":"m%d","queue":"many"}`+"\n", i)
	}
	if out := mustCLIEnv(t, bin, remoteEnv, many.String(), "enqueue", "--stdin"); !strings.Contains(out, "enqueued 120 jobs") {
		t.Errorf("enqueue --stdin of 120 jobs = %q", out)
	}
	bad := `{"kind":"ok","queue":"stdin"}` + "\n" + `{"kind":"ok","queue":"stdin","max_attempts":"many"}` + "\n" + `{"kind":"ok","queue":"stdin"}` + "\n"
	r := runCLIEnv(t, bin, remoteEnv, bad, "enqueue", "--stdin")
	if r.code != 2 || !strings.Contains(r.stderr, "line 2") || !strings.Contains(r.stderr, "max_attempts") {
		t.Errorf("enqueue --stdin with a bad line: %+v", r)
	}
	if r := runCLIEnv(t, bin, remoteEnv, "", "enqueue", "--stdin", "--kind", "x"); r.code != 2 {
		t.Errorf("enqueue --stdin --kind: exit %d", r.code)
	}
	var stdinJobs jobsBody
	if err := json.Unmarshal([]byte(mustCLIEnv(t, bin, []string{"READPAST_URL=" + srv.base, "READPAST_TOKEN=read-token-0123456789"}, "", "jobs", "list", "--queue", "stdin", "--json")), &stdinJobs); err != nil {
		t.Fatal(err)
	}
	if len(stdinJobs.Jobs) != 3 || stdinJobs.NextCursor != nil || strings.Join(strings.Fields(string(stdinJobs.Jobs[1].Payload)), "") != "[1]" {
		t.Errorf("queue stdin after a good and a bad --stdin = %+v, want 3 jobs", stdinJobs)
	}
	for _, target := range [][]string{remote, direct} {
		out := mustCLI(t, bin, "", append([]string{"jobs", "list", "--queue", "stdin", "--limit", "2"}, target...)...)
		if !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "s3") {
			t.Errorf("jobs list table %v = %q", target, out)
		}
		if out := mustCLI(t, bin, "", append([]string{"stats"}, target...)...); !strings.Contains(out, "QUEUE") || !strings.Contains(out, "stdin") || !strings.Contains(out, "(all)") {
			t.Errorf("stats %v = %q", target, out)
		}
	}
	var summary jobsBody
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"jobs", "list", "--queue", "stdin", "--json", "--summary"}, remote...)...)), &summary); err != nil ||
		len(summary.Jobs) != 3 || summary.Jobs[1].Payload != nil || summary.Jobs[1].Kind != "s2" {
		t.Errorf("jobs list --summary = %+v, %v", summary, err)
	}
	if r := runCLI(t, bin, "", append([]string{"jobs", "list", "--state", "nope"}, remote...)...); r.code != 2 {
		t.Errorf("jobs list --state nope: exit %d", r.code)
	}
	id := fmt.Sprint(stdinJobs.Jobs[0].ID)
	if out := mustCLI(t, bin, "", append([]string{"jobs", "show", id}, remote...)...); !strings.Contains(out, "s3") || !strings.Contains(out, "pending") {
		t.Errorf("jobs show = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"jobs", "cancel", id, "--json"}, remote...)...); !strings.Contains(out, `"cancelled"`) {
		t.Errorf("jobs cancel = %q", out)
	}
	for _, target := range [][]string{remote, direct} {
		if r := runCLI(t, bin, "", append([]string{"jobs", "cancel", id}, target...)...); r.code != 1 || r.stderr != "readpast jobs cancel: cannot cancel job "+id+" in its state (see 'readpast jobs show "+id+"')\n" {
			t.Errorf("cancelling twice %v: %+v", target, r)
		}
		if r := runCLI(t, bin, "", append([]string{"jobs", "show", "987654321"}, target...)...); r.code != 1 || r.stderr != "readpast jobs show: job 987654321 not found\n" {
			t.Errorf("jobs show of a missing job %v: %+v", target, r)
		}
	}
	if out := mustCLI(t, bin, "", append([]string{"jobs", "retry", id}, direct...)...); !strings.Contains(out, "pending") {
		t.Errorf("jobs retry = %q", out)
	}
	for _, arg := range []string{"abc", "+1", "01"} {
		if r := runCLI(t, bin, "", append([]string{"jobs", "show", arg}, remote...)...); r.code != 2 {
			t.Errorf("jobs show %s: %+v", arg, r)
		}
	}
	var cliStats struct {
		Queues map[string]map[string]int64 `json:"queues"`
		Paused []string                    `json:"paused"`
	}
	if err := json.Unmarshal([]byte(mustCLIEnv(t, bin, remoteEnv, "", "stats", "--json")), &cliStats); err != nil || cliStats.Queues["stdin"]["pending"] != 3 {
		t.Errorf("stats --json: %+v %v", cliStats, err)
	}
	// Pause through the server, see it directly, resume directly.
	if out := mustCLI(t, bin, "", append([]string{"queues", "pause", "stdin"}, remote...)...); !strings.Contains(out, "queue stdin is paused") || !strings.Contains(out, "3 pending") {
		t.Errorf("queues pause = %q", out)
	}
	var none struct{ Jobs []json.RawMessage }
	api.must("POST", "/v1/claim", `{"worker":"w","queues":["stdin"],"limit":10}`, 200, &none)
	if len(none.Jobs) != 0 {
		t.Errorf("claimed %d jobs from a paused queue", len(none.Jobs))
	}
	if out := mustCLI(t, bin, "", append([]string{"queues", "list"}, direct...)...); !strings.Contains(out, "PAUSED") || !regexp.MustCompile(`(?m)^stdin +since `).MatchString(out) {
		t.Errorf("queues list = %q", out)
	}
	if err := json.Unmarshal([]byte(mustCLIEnv(t, bin, remoteEnv, "", "stats", "--json")), &cliStats); err != nil || !slices.Equal(cliStats.Paused, []string{"stdin"}) {
		t.Errorf("stats --json with stdin paused: %+v %v", cliStats, err)
	}
	if r := runCLI(t, bin, "", append([]string{"queues", "pause", "a b"}, remote...)...); r.code != 2 || !strings.Contains(r.stderr, "queue") {
		t.Errorf("queues pause with a bad name: %+v", r)
	}
	if r := runCLI(t, bin, "", "queues", "pause", "x", "--url", srv.base, "--token", "read-token-0123456789"); r.code != 1 || !strings.Contains(r.stderr, "full-access token") {
		t.Errorf("queues pause with a read token: %+v", r)
	}
	if out := mustCLI(t, bin, "", append([]string{"queues", "resume", "stdin"}, direct...)...); out != "queue stdin is running: 3 pending jobs\n" {
		t.Errorf("queues resume = %q", out)
	}
	var ql struct {
		Queues []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"queues", "--json"}, remote...)...)), &ql); err != nil || len(ql.Queues) == 0 {
		t.Errorf("queues --json: %+v %v", ql, err)
	}
	for _, q := range ql.Queues {
		if q.Paused {
			t.Errorf("queue %s still paused after resume", q.Name)
		}
	}
	// Tokens: none, or a read-only one for a write.
	if r := runCLI(t, bin, "", "stats", "--url", srv.base); r.code != 1 || !strings.Contains(r.stderr, "--token or $READPAST_TOKEN") {
		t.Errorf("stats without a token: %+v", r)
	}
	if r := runCLI(t, bin, "", "enqueue", "--kind", "a", "--url", srv.base, "--token", "read-token-0123456789"); r.code != 1 || !strings.Contains(r.stderr, "full-access token") {
		t.Errorf("enqueue with a read token: %+v", r)
	}
	if r := runCLI(t, bin, "", "stats", "--url", srv.base, "--database-url", db); r.code != 2 {
		t.Errorf("stats with --url and --database-url: %+v", r)
	}

	// Unique keys and the Idempotency-Key header over HTTP, and through
	// the CLI.
	var u1, u2 job
	api.must("POST", "/v1/jobs", `{"kind":"u","queue":"uq","unique_key":"order-9"}`, 201, &u1)
	if body := api.must("POST", "/v1/jobs", `{"kind":"u","queue":"uq","unique_key":"order-9"}`, 200, &u2); u2.ID != u1.ID || !strings.Contains(string(body), `"duplicate":true`) {
		t.Errorf("duplicate enqueue: %s", body)
	}
	if out := mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "u", "--queue", "uq", "--unique-key", "order-9"}, remote...)...); !strings.Contains(out, fmt.Sprintf("nothing enqueued: job %d holds unique key", u1.ID)) {
		t.Errorf("enqueue --unique-key of a held key = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "u", "--queue", "uq", "--unique-key", "order-10", "--unique-for", "1h"}, direct...)...); !strings.Contains(out, "unique key:") || !strings.Contains(out, "order-10") {
		t.Errorf("enqueue --unique-key --unique-for = %q", out)
	}
	if out := mustCLIEnv(t, bin, remoteEnv, `{"kind":"u","queue":"uq","unique_key":"order-10"}`+"\n"+`{"kind":"u","queue":"uq","unique_key":"order-11"}`+"\n", "enqueue", "--stdin"); !strings.Contains(out, "enqueued 1 jobs") || !strings.Contains(out, "1 lines were duplicates") {
		t.Errorf("enqueue --stdin with a duplicate = %q", out)
	}
	if r := runCLI(t, bin, "", append([]string{"enqueue", "--kind", "u", "--unique-for", "1h"}, remote...)...); r.code != 2 || !strings.Contains(r.stderr, "--unique-for") {
		t.Errorf("--unique-for without --unique-key: %+v", r)
	}
	if r := runCLI(t, bin, "", append([]string{"enqueue", "--kind", "u", "--unique-key", "k", "--unique-for", "1ns"}, remote...)...); r.code != 2 || !strings.Contains(r.stderr, "between 1s and 8784h0m0s") {
		t.Errorf("--unique-for 1ns: %+v", r)
	}
	idem := func() (int, []byte) {
		req, err := http.NewRequest("POST", srv.base+"/v1/jobs", strings.NewReader(`{"kind":"u","queue":"uq"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer full-token-0123456789")
		req.Header.Set("Idempotency-Key", "pay-77")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if st, b := idem(); st != 201 {
		t.Errorf("Idempotency-Key, first: %d %s", st, b)
	}
	if st, b := idem(); st != 200 || !strings.Contains(string(b), `"duplicate":true`) {
		t.Errorf("Idempotency-Key, again: %d %s", st, b)
	}

	// Schedules: set through the server, fired by its scheduler, shown,
	// paused, resumed and deleted, through the server and directly.
	if out := mustCLI(t, bin, "", append([]string{"schedules", "set", "beat", "--cron", "@every 1s", "--kind", "beat", "--queue", "sq", "--payload", `{"b":1}`}, remote...)...); !strings.Contains(out, "created schedule beat") || !strings.Contains(out, "@every 1s") {
		t.Errorf("schedules set = %q", out)
	}
	api.must("PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","time_zone":"Europe/Paris","catch_up":"once","job":{"kind":"report"}}`, 201, nil)
	deadline = time.Now().Add(20 * time.Second)
	for {
		var sc struct {
			LastJobID *int64 `json:"last_job_id"`
			Runs      []struct {
				JobID int64 `json:"job_id"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"schedules", "show", "beat", "--json"}, direct...)...)), &sc); err != nil {
			t.Fatal(err)
		}
		if len(sc.Runs) >= 2 {
			api.must("GET", fmt.Sprintf("/v1/jobs/%d", sc.Runs[0].JobID), "", 200, nil)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's scheduler made %d jobs in 20 s of an @every 1s schedule", len(sc.Runs))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, target := range [][]string{remote, direct} {
		if out := mustCLI(t, bin, "", append([]string{"schedules", "list"}, target...)...); !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "beat") || !strings.Contains(out, "Europe/Paris") {
			t.Errorf("schedules list %v = %q", target, out)
		}
	}
	if out := mustCLI(t, bin, "", append([]string{"schedules", "show", "beat"}, remote...)...); !strings.Contains(out, "TICK") || !strings.Contains(out, "kind beat, queue sq") {
		t.Errorf("schedules show = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"schedules", "pause", "beat"}, remote...)...); !strings.Contains(out, "paused") {
		t.Errorf("schedules pause = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"schedules", "resume", "beat"}, direct...)...); !strings.Contains(out, "running") {
		t.Errorf("schedules resume = %q", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedules", "set", "x", "--cron", "61 * * * *", "--kind", "k"}, "--cron"},
		{[]string{"schedules", "set", "x", "--cron", "@hourly", "--kind", "k", "--time-zone", "Nowhere/X"}, "--time-zone"},
		{[]string{"schedules", "set", "x", "--cron", "@hourly"}, "--kind"},
		{[]string{"schedules", "frob"}, "unknown action"},
	} {
		if r := runCLI(t, bin, "", append(tc.args, remote...)...); r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if out := mustCLI(t, bin, "", append([]string{"schedules", "delete", "beat"}, remote...)...); !strings.Contains(out, "deleted schedule beat") {
		t.Errorf("schedules delete = %q", out)
	}
	if r := runCLI(t, bin, "", append([]string{"schedules", "show", "beat"}, direct...)...); r.code != 1 || !strings.Contains(r.stderr, `schedule "beat" not found`) {
		t.Errorf("schedules show after delete: %+v", r)
	}
	if r := runCLI(t, bin, "", append([]string{"schedules", "delete", "beat"}, remote...)...); r.code != 1 || !strings.Contains(r.stderr, `schedule "beat" not found`) {
		t.Errorf("schedules delete twice: %+v", r)
	}

	runLimitsE2E(t, bin, api, remote, direct)

	// The Python worker runs add and fail jobs to their end.
	runPythonWorker(t, bin, api, srv.base)

	// Shutdown ends a long poll in flight and exits cleanly.
	polled := make(chan int, 1)
	go func() {
		st, _ := api.do("POST", "/v1/claim", `{"worker":"late","queues":["never"],"wait_seconds":60}`)
		polled <- st
	}()
	time.Sleep(300 * time.Millisecond)
	stopped := time.Now()
	srv.stop(t)
	select {
	case st := <-polled:
		if st != 200 {
			t.Errorf("long poll during shutdown: status %d", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("long poll outlived the server")
	}
	if d := time.Since(stopped); d > 15*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if !strings.Contains(srv.log.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", srv.log.String())
	}
}

// runPythonWorker follows examples/python-worker's README from its own
// folder: it enqueues add and fail jobs with the readpast command (which
// reaches the server through $READPAST_URL, creating no database there),
// runs the worker until it has handled them, and checks their final
// states. The worker runs with python3 -S (no site-packages), so that it
// takes the readpast package from this clone (clients/python/src), as a
// clone without the package installed does, whatever is installed.
func runPythonWorker(t *testing.T, bin string, api client, base string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if pgtest.InCI() {
			t.Fatal("python3 not found")
		}
		t.Log("python3 not found: skipping the Python worker")
		return
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "python-worker"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"READPAST_URL=" + base, "READPAST_TOKEN=full-token-0123456789"}
	var batch jobsBody
	for _, args := range [][]string{
		{"--kind", "add", "--payload", `{"numbers":[1,2,3]}`},
		{"--kind", "add", "--payload", `{"numbers":[10,-4,0.5]}`},
		{"--kind", "add", "--payload", `[]`},
		{"--kind", "fail", "--payload", `{"message":"on purpose"}`, "--max-attempts", "2"},
	} {
		r := runCLIIn(t, bin, dir, env, "", append(append([]string{"enqueue"}, args...), "--queue", "py", "--json")...)
		var j job
		if err := json.Unmarshal([]byte(r.stdout), &j); r.code != 0 || err != nil {
			t.Fatalf("readpast enqueue %v in %s: exit %d, %v\n%s", args, dir, r.code, err, r.stderr)
		}
		batch.Jobs = append(batch.Jobs, j)
	}
	if _, err := os.Stat(filepath.Join(dir, "readpast.db")); err == nil {
		t.Errorf("readpast enqueue created %s", filepath.Join(dir, "readpast.db"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 3 add jobs, and 2 attempts of the fail job.
	cmd := exec.CommandContext(ctx, python, "-S", "worker.py",
		"--queue", "py", "--max-jobs", "5", "--wait", "5", "--lease", "5", "--heartbeat", "0.5", "--name", "py-e2e")
	cmd.Dir = dir
	cmd.Env = childEnv(env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python worker: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "waiting for jobs") {
		t.Errorf("the worker did not say it was waiting:\n%s", out)
	}
	if !strings.Contains(string(out), "handled 5 job(s)") {
		t.Errorf("the worker did not stop after --max-jobs 5:\n%s", out)
	}
	wants := []struct{ state, result string }{
		{"succeeded", `{"sum":6}`}, {"succeeded", `{"sum":6.5}`}, {"succeeded", `{"sum":0}`}, {"failed", ""},
	}
	for i, w := range wants {
		var got job
		api.must("GET", fmt.Sprintf("/v1/jobs/%d", batch.Jobs[i].ID), "", 200, &got)
		if got.State != w.state || (w.result != "" && string(got.Result) != w.result) {
			t.Errorf("job %d (%s) = state %s result %s, want %s %s\nworker output:\n%s", got.ID, got.Kind, got.State, got.Result, w.state, w.result, out)
		}
		if w.state == "failed" && (got.Attempt != 2 || len(got.Errors) != 2 || !strings.Contains(got.Errors[1].Message, "on purpose")) {
			t.Errorf("failed job = %+v", got)
		}
	}
}
