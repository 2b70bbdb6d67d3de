package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// testEnv is a handler on a real SQLite store in a temporary file, served
// by an httptest server.
type testEnv struct {
	t     *testing.T
	store readpast.Store
	srv   *httptest.Server
	reg   *prometheus.Registry
	// token is sent as the bearer token when not empty.
	token string
	// server is the handler, for tests that look inside it.
	server *server
}

// newEnv starts a handler on a fresh SQLite store. mut may adjust the
// config before New.
func newEnv(t *testing.T, mut func(*Config)) *testEnv {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "readpast.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return newEnvOn(t, store, mut)
}

// newPostgresEnv starts a handler on a fresh, migrated PostgreSQL database
// (see internal/pgtest).
func newPostgresEnv(t *testing.T, mut func(*Config)) *testEnv {
	t.Helper()
	ctx := context.Background()
	store, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return newEnvOn(t, store, mut)
}

// newEnvOn starts a handler on store. mut may adjust the config before New.
func newEnvOn(t *testing.T, store readpast.Store, mut func(*Config)) *testEnv {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := Config{
		Store:        store,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registry:     reg,
		PollInterval: 50 * time.Millisecond,
	}
	if mut != nil {
		mut(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testEnv{t: t, store: store, srv: srv, reg: cfg.Registry, server: h.(*server)}
}

// do sends a request and returns the status and body.
func (e *testEnv) do(method, path, body string) (int, []byte) {
	e.t.Helper()
	return e.doCtx(context.Background(), method, path, body, e.token)
}

// doCtx sends a request with ctx and token.
func (e *testEnv) doCtx(ctx context.Context, method, path, body, token string) (int, []byte) {
	e.t.Helper()
	hdr := map[string]string{}
	if body != "" {
		hdr["Content-Type"] = "application/json"
	}
	return e.request(ctx, method, path, body, token, "", hdr)
}

// request sends a request with ctx, token (when not empty) and the headers
// in hdr; host, when not empty, replaces the Host header. It returns the
// status and body, or 0 and nil once ctx is done.
func (e *testEnv) request(ctx context.Context, method, path, body, token, host string, hdr map[string]string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// must sends a request, requires status want, and decodes the body into
// out when out is not nil.
func (e *testEnv) must(method, path, body string, want int, out any) []byte {
	e.t.Helper()
	status, b := e.do(method, path, body)
	if status != want {
		e.t.Fatalf("%s %s %s: status %d, want %d; body %s", method, path, body, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return b
}

// wantError requires an error response with the given status, code and
// (when not empty) field.
func (e *testEnv) wantError(method, path, body string, status int, code, field string) {
	e.t.Helper()
	got, b := e.do(method, path, body)
	checkError(e.t, method+" "+path+" "+trunc(body), got, b, status, code, field)
}

// checkError checks an error response.
func checkError(t *testing.T, what string, gotStatus int, body []byte, status int, code, field string) {
	t.Helper()
	if gotStatus != status {
		t.Errorf("%s: status %d, want %d; body %s", what, gotStatus, status, body)
		return
	}
	var eb ErrorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Errorf("%s: error body %s is not {\"error\":{...}}: %v", what, body, err)
		return
	}
	if eb.Error.Code != code {
		t.Errorf("%s: code %q, want %q; body %s", what, eb.Error.Code, code, body)
	}
	if field != "" && eb.Error.Field != field {
		t.Errorf("%s: field %q, want %q; body %s", what, eb.Error.Field, field, body)
	}
	if eb.Error.Message == "" {
		t.Errorf("%s: empty message", what)
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// enqueue enqueues one job through the API.
func (e *testEnv) enqueue(body string) Job {
	e.t.Helper()
	var j Job
	e.must("POST", "/v1/jobs", body, http.StatusCreated, &j)
	return j
}

// claim claims through the API.
func (e *testEnv) claim(body string) []Job {
	e.t.Helper()
	var r JobsResponse
	e.must("POST", "/v1/claim", body, http.StatusOK, &r)
	return r.Jobs
}

// get fetches a job through the API.
func (e *testEnv) get(id int64) Job {
	e.t.Helper()
	var j Job
	e.must("GET", "/v1/jobs/"+itoa(id), "", http.StatusOK, &j)
	return j
}

// total returns how many jobs the store holds in every state.
func (e *testEnv) total() int64 {
	e.t.Helper()
	stats, err := e.store.Stats(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for _, s := range stats {
		n += s.Count
	}
	return n
}

// fingerprint lists every job as JSON, to check that a request changed
// nothing.
func (e *testEnv) fingerprint() string {
	e.t.Helper()
	res, err := e.store.List(context.Background(), readpast.ListParams{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := json.Marshal(NewJobs(res.Jobs))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func itoa(id int64) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stringsReader returns a reader of s, or nil when s is empty.
func stringsReader(s string) io.Reader {
	if s == "" {
		return nil
	}
	return strings.NewReader(s)
}

// readAll reads a response body.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
