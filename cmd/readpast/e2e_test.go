package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
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
		runE2E(t, bin, pgtest.URL(t))
	})
	t.Run("auth off", func(t *testing.T) {
		runAuthOff(t, bin, filepath.Join(t.TempDir(), "off.db"))
	})
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

// inCI reports whether $CI is true, read as internal/pgtest reads it
// (strconv.ParseBool: true, 1, TRUE, True...).
func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv()
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
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.log, line)
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
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
	case a := <-addr:
		s.base = "http://" + a
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
	if out := mustCLI(t, bin, "", "migrate", "status", "--database-url", db); !strings.HasPrefix(out, "schema version 0 of ") || !strings.Contains(out, " pending)") {
		t.Errorf("migrate status before migrating = %q", out)
	}
	if out := mustCLI(t, bin, "", "migrate", "up", "--database-url", db); !strings.Contains(out, "up to date") {
		t.Errorf("migrate up = %q", out)
	}
	var ms struct{ Current, Latest, Pending int }
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

	srv := startServer(t, bin, []string{"READPAST_TOKENS=env-token-1, env-token-2"},
		"--database-url", db, "--no-migrate", "--token", "full-token", "--read-token", "read-token",
		"--max-batch", "50", "--rescue-interval", "100ms")
	api := client{t: t, base: srv.base, token: "full-token"}
	anon, ro := api.with(""), api.with("read-token")

	// Health, auth, documents.
	anon.must("GET", "/healthz", "", 200, nil)
	anon.must("GET", "/readyz", "", 200, nil)
	anon.wantError("GET", "/v1/stats", "", 401, "unauthorized", "")
	api.with("nope").wantError("GET", "/v1/stats", "", 401, "unauthorized", "")
	ro.must("GET", "/v1/stats", "", 200, nil)
	ro.wantError("POST", "/v1/jobs", `{"kind":"a"}`, 403, "forbidden", "")
	api.with("env-token-2").must("GET", "/v1/stats", "", 200, nil)
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
		`readpast_queue_jobs{queue="e2e",state="pending"} 3`, "readpast_claim_duration_seconds_bucket", "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The CLI, on the same database while the server runs.
	dbArg := []string{"--database-url", db}
	var cj job
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "add", "--payload", `{"numbers":[1,2,3]}`, "--queue", "cli", "--priority", "-1", "--json"}, dbArg...)...)), &cj); err != nil || cj.Kind != "add" || cj.Queue != "cli" {
		t.Fatalf("enqueue --json: %+v %v", cj, err)
	}
	if out := mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "plain", "--queue", "cli", "--run-at", "2030-01-01T00:00:00Z", "--max-attempts", "2", "--group", "cg"}, dbArg...)...); !strings.Contains(out, "state:") || !strings.Contains(out, "2030-01-01T00:00:00Z") {
		t.Errorf("enqueue table output = %q", out)
	}
	r := runCLI(t, bin, "", append([]string{"enqueue", "--kind", "x", "--payload", "{nope"}, dbArg...)...)
	if r.code != 2 || !strings.Contains(r.stderr, "--payload") {
		t.Errorf("enqueue with a bad payload: %+v", r)
	}
	r = runCLI(t, bin, "", append([]string{"enqueue", "--kind", "x", "--priority", "7777"}, dbArg...)...)
	if r.code != 2 || !strings.Contains(r.stderr, "--priority") {
		t.Errorf("enqueue with a bad priority: %+v", r)
	}
	lines := `{"kind":"s1","queue":"stdin"}` + "\n\n" + `{"kind":"s2","queue":"stdin","payload":[1]}` + "\n" + `{"kind":"s3","queue":"stdin","priority":5}` + "\n"
	if out := mustCLI(t, bin, lines, append([]string{"enqueue", "--stdin"}, dbArg...)...); !strings.Contains(out, "enqueued 3 jobs") {
		t.Errorf("enqueue --stdin = %q", out)
	}
	bad := `{"kind":"ok","queue":"stdin"}` + "\n" + `{"kind":"ok","queue":"stdin","max_attempts":"many"}` + "\n" + `{"kind":"ok","queue":"stdin"}` + "\n"
	r = runCLI(t, bin, bad, append([]string{"enqueue", "--stdin"}, dbArg...)...)
	if r.code != 2 || !strings.Contains(r.stderr, "line 2") || !strings.Contains(r.stderr, "max_attempts") {
		t.Errorf("enqueue --stdin with a bad line: %+v", r)
	}
	if r := runCLI(t, bin, "", append([]string{"enqueue", "--stdin", "--kind", "x"}, dbArg...)...); r.code != 2 {
		t.Errorf("enqueue --stdin --kind: exit %d", r.code)
	}
	var stdinJobs jobsBody
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"jobs", "list", "--queue", "stdin", "--json"}, dbArg...)...)), &stdinJobs); err != nil {
		t.Fatal(err)
	}
	if len(stdinJobs.Jobs) != 3 || stdinJobs.NextCursor != nil {
		t.Errorf("queue stdin after a good and a bad --stdin holds %d jobs, want 3", len(stdinJobs.Jobs))
	}
	out := mustCLI(t, bin, "", append([]string{"jobs", "list", "--queue", "stdin", "--limit", "2"}, dbArg...)...)
	if !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "s3") {
		t.Errorf("jobs list table = %q", out)
	}
	if r := runCLI(t, bin, "", append([]string{"jobs", "list", "--state", "nope"}, dbArg...)...); r.code != 2 {
		t.Errorf("jobs list --state nope: exit %d", r.code)
	}
	id := fmt.Sprint(stdinJobs.Jobs[0].ID)
	if out := mustCLI(t, bin, "", append([]string{"jobs", "show", id}, dbArg...)...); !strings.Contains(out, "s3") || !strings.Contains(out, "pending") {
		t.Errorf("jobs show = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"jobs", "cancel", id, "--json"}, dbArg...)...); !strings.Contains(out, `"cancelled"`) {
		t.Errorf("jobs cancel = %q", out)
	}
	if r := runCLI(t, bin, "", append([]string{"jobs", "cancel", id}, dbArg...)...); r.code != 1 {
		t.Errorf("cancelling twice: %+v", r)
	}
	if out := mustCLI(t, bin, "", append([]string{"jobs", "retry", id}, dbArg...)...); !strings.Contains(out, "pending") {
		t.Errorf("jobs retry = %q", out)
	}
	if r := runCLI(t, bin, "", append([]string{"jobs", "show", "987654321"}, dbArg...)...); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("jobs show of a missing job: %+v", r)
	}
	if r := runCLI(t, bin, "", append([]string{"jobs", "show", "abc"}, dbArg...)...); r.code != 2 {
		t.Errorf("jobs show abc: %+v", r)
	}
	if out := mustCLI(t, bin, "", append([]string{"stats"}, dbArg...)...); !strings.Contains(out, "QUEUE") || !strings.Contains(out, "stdin") || !strings.Contains(out, "(all)") {
		t.Errorf("stats = %q", out)
	}
	var cliStats struct {
		Queues map[string]map[string]int64 `json:"queues"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"stats", "--json"}, dbArg...)...)), &cliStats); err != nil || cliStats.Queues["stdin"]["pending"] != 3 {
		t.Errorf("stats --json: %+v %v", cliStats, err)
	}

	// The Python worker runs add and fail jobs to their end.
	runPythonWorker(t, api, srv.base)

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

// runPythonWorker enqueues add and fail jobs, runs examples/python-worker
// until it has handled them, and checks their final states.
func runPythonWorker(t *testing.T, api client, base string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if inCI() {
			t.Fatal("python3 not found")
		}
		t.Log("python3 not found: skipping the Python worker")
		return
	}
	var batch jobsBody
	api.must("POST", "/v1/jobs/batch", `{"jobs":[
		{"kind":"add","queue":"py","payload":{"numbers":[1,2,3]}},
		{"kind":"add","queue":"py","payload":{"numbers":[10,-4,0.5]}},
		{"kind":"add","queue":"py","payload":[]},
		{"kind":"fail","queue":"py","payload":{"message":"on purpose"},"max_attempts":2}]}`, 201, &batch)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// 3 add jobs, and 2 attempts of the fail job.
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "..", "examples", "python-worker", "worker.py"),
		"--url", base, "--queue", "py", "--max-jobs", "5", "--wait", "5", "--lease", "5", "--heartbeat", "0.5", "--name", "py-e2e")
	cmd.Env = childEnv("READPAST_TOKEN=full-token")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python worker: %v\n%s", err, out)
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
