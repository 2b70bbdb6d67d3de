// Package httpapi serves a readpast.Store over HTTP with JSON bodies, so
// that producers and workers in any language can enqueue, claim and finish
// jobs. The wire contract is described by the OpenAPI document the handler
// serves at GET /v1/openapi.json and by docs/http-api.md.
package httpapi

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/buildinfo"
)

// DefaultPollInterval is how often long-polling claims for one set of
// queues look again when no wake-up arrives (see Config.PollInterval).
const DefaultPollInterval = 200 * time.Millisecond

// readyTimeout bounds the store check behind GET /readyz.
const readyTimeout = 2 * time.Second

// releaseTimeout bounds releasing jobs claimed for a client that went away.
const releaseTimeout = 5 * time.Second

// writeTimeout bounds a store write (a claim included) once it is sent; see
// writeContext.
const writeTimeout = 30 * time.Second

// DefaultIdempotencyPeriod is Config.IdempotencyPeriod's default.
const DefaultIdempotencyPeriod = 24 * time.Hour

// DefaultWriteTimeout is Config.WriteTimeout's default.
const DefaultWriteTimeout = time.Minute

//go:embed openapi.json
var openAPIDoc []byte

// Config configures the handler New returns.
type Config struct {
	// Store holds the jobs. Required. When it implements readpast.Notifier,
	// long-polling claims wake as soon as jobs are enqueued. When it has a
	// method IsUnavailable(error) bool (both stores do), errors it reports
	// that way are answered 503 unavailable.
	Store readpast.Store
	// Logger receives request and error logs; nil discards them. Tokens
	// and request bodies are never logged.
	Logger *slog.Logger
	// Registry receives the Prometheus metrics and is served at
	// GET /metrics; nil means no metrics and no /metrics route.
	Registry *prometheus.Registry
	// MetricsMaxQueues and MetricsMaxKinds bound the queue and kind labels
	// of the job counters: the first ones seen keep their name, the rest
	// are counted under "_other" (OtherLabel). The queue depth gauge keeps
	// the MetricsMaxQueues busiest queues. 0 means DefaultMetricsMaxQueues
	// and DefaultMetricsMaxKinds.
	MetricsMaxQueues int
	MetricsMaxKinds  int
	// Tokens are bearer tokens with full access.
	Tokens []string
	// ReadTokens are bearer tokens that may only GET. When both Tokens and
	// ReadTokens are empty, authentication is off.
	ReadTokens []string
	// AllowedHosts are host names or IP addresses that, besides the
	// loopback ones, a request may name in its Host header while
	// authentication is off. With auth off the handler answers only
	// requests for localhost, 127.0.0.0/8 or ::1 (on any port) and these
	// hosts, and 403 host_not_allowed to the rest, so that a web page cannot
	// reach it through DNS rebinding. Entries are compared without a port
	// and ignoring case; there are no wildcards. Unused while auth is on.
	AllowedHosts []string
	// Throttle limits, per client address, the failed bearer tokens: past
	// its burst, a request with an Authorization header is answered 429
	// too_many_attempts (with Retry-After) before its token is checked.
	// Give the dashboard's Config the same one so that they count
	// together. nil means a throttle of the handler's own, with the
	// ThrottleConfig defaults, Registry and Logger.
	Throttle *Throttle
	// MaxBodyBytes limits a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatch limits the jobs in one batch enqueue; 0 means DefaultMaxBatch.
	MaxBatch int
	// MaxResponseBytes is the byte budget of a list or claim response; 0
	// means DefaultMaxResponseBytes. A list that reaches it returns fewer
	// jobs than asked and a next_cursor, a claim returns fewer jobs (and
	// releases, unworked, any it took that did not fit). A response always
	// holds at least one job, however large.
	MaxResponseBytes int64
	// WriteTimeout bounds how long a client may take to read a response
	// (a long-polling claim's wait is added to it), so that slow readers
	// cannot hold connections and response memory; 0 means
	// DefaultWriteTimeout. It applies where the server supports
	// http.ResponseController write deadlines (net/http's does).
	WriteTimeout time.Duration
	// PollInterval is how often the claims waiting for one set of queues
	// look again when no wake-up arrives; 0 means DefaultPollInterval. The
	// waiting claims share it: however many wait for the same queues, one
	// of them claims per interval (see the waiters type), and the server
	// polls at most 16 queue sets per interval.
	PollInterval time.Duration
	// IdempotencyPeriod is how long an Idempotency-Key of POST /v1/jobs
	// holds, whatever the job's outcome; 0 means DefaultIdempotencyPeriod.
	IdempotencyPeriod time.Duration
	// MaxSnoozes is how many times POST /v1/jobs/{id}/snooze may snooze
	// one job: past it the answer is 409 snooze_limit and the job stays
	// running under its claim (the worker then fails or completes it).
	// 0 means readpast.DefaultMaxSnoozes.
	MaxSnoozes int
	// Closing, when closed, ends long-polling claims early with no jobs so
	// that a graceful shutdown need not wait for them. Optional.
	Closing <-chan struct{}
}

// route is one endpoint of the API.
type route struct {
	pattern string
	// open routes need no token.
	open bool
	// query routes read a query string; on the others under /v1 one is
	// refused, not ignored.
	query   bool
	handler http.HandlerFunc
}

// server is the handler New returns.
type server struct {
	store    readpast.Store
	log      *slog.Logger
	metrics  *metrics
	guard    *Guard
	throttle *Throttle
	maxBody  int64
	maxBatch int
	maxResp  int
	writeDL  time.Duration
	waiters  *waiters
	idemFor  time.Duration
	snoozes  int
	closing  <-chan struct{}
	mux      *http.ServeMux
	open     map[string]bool
	noQuery  map[string]bool // the /v1 routes that read no query string
	routes   []route
	now      func() time.Time
}

// New returns the HTTP handler for cfg. It fails when cfg has no store, a
// token is empty or shorter than MinTokenBytes, a limit is negative, or the
// metrics cannot be registered.
func New(cfg Config) (http.Handler, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newServer(cfg Config) (*server, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxBatch < 0 || cfg.PollInterval < 0 || cfg.MaxResponseBytes < 0 || cfg.WriteTimeout < 0 ||
		cfg.IdempotencyPeriod < 0 || cfg.MaxSnoozes < 0 ||
		cfg.MetricsMaxQueues < 0 || cfg.MetricsMaxKinds < 0 {
		return nil, errors.New("httpapi: Config limits must not be negative")
	}
	s := &server{
		store:    cfg.Store,
		log:      cfg.Logger,
		maxBody:  cfg.MaxBodyBytes,
		maxBatch: cfg.MaxBatch,
		snoozes:  cmp.Or(cfg.MaxSnoozes, readpast.DefaultMaxSnoozes),
		closing:  cfg.Closing,
		mux:      http.NewServeMux(),
		open:     map[string]bool{},
		noQuery:  map[string]bool{},
		now:      time.Now,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatch
	}
	s.maxResp = int(min(cmp.Or(cfg.MaxResponseBytes, DefaultMaxResponseBytes), 1<<40))
	s.writeDL = cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout)
	s.idemFor = cmp.Or(cfg.IdempotencyPeriod, DefaultIdempotencyPeriod)
	if s.idemFor > readpast.MaxUniqueFor {
		return nil, fmt.Errorf("httpapi: Config.IdempotencyPeriod is longer than %s", readpast.MaxUniqueFor)
	}
	poll := cfg.PollInterval
	if poll == 0 {
		poll = DefaultPollInterval
	}
	s.waiters = newWaiters(cfg.Store, poll, s.log)
	guard, err := NewGuard(cfg.Tokens, cfg.ReadTokens, cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	s.guard = guard
	s.throttle = cfg.Throttle
	if s.throttle == nil {
		if s.throttle, err = NewThrottle(ThrottleConfig{Registry: cfg.Registry, Logger: s.log}); err != nil {
			return nil, err
		}
	}
	if cfg.Registry != nil {
		m, err := newMetrics(cfg.Registry, cfg.Store, s.log,
			cmp.Or(cfg.MetricsMaxQueues, DefaultMetricsMaxQueues), cmp.Or(cfg.MetricsMaxKinds, DefaultMetricsMaxKinds))
		if err != nil {
			return nil, err
		}
		s.metrics = m
	}

	s.routes = []route{
		{pattern: "GET /healthz", open: true, handler: s.healthz},
		{pattern: "GET /readyz", open: true, handler: s.readyz},
		{pattern: "GET /v1", handler: s.info},
		{pattern: "GET /v1/openapi.json", handler: s.openapi},
		{pattern: "POST /v1/jobs", handler: s.enqueue},
		{pattern: "POST /v1/jobs/batch", handler: s.enqueueBatch},
		{pattern: "POST /v1/flows", handler: s.enqueueFlow},
		{pattern: "POST /v1/batches", handler: s.openBatch},
		{pattern: "GET /v1/batches/{id}", handler: s.getBatch},
		{pattern: "POST /v1/batches/{id}/jobs", handler: s.addToBatch},
		{pattern: "POST /v1/batches/{id}/seal", handler: s.sealBatch},
		{pattern: "GET /v1/jobs", query: true, handler: s.list},
		{pattern: "GET /v1/jobs/{id}", handler: s.get},
		{pattern: "GET /v1/jobs/{id}/relatives", query: true, handler: s.relatives},
		{pattern: "GET /v1/jobs/{id}/flow", query: true, handler: s.flowGraph},
		{pattern: "DELETE /v1/jobs/{id}", handler: s.deleteJob},
		{pattern: "POST /v1/claim", handler: s.claim},
		{pattern: "POST /v1/jobs/complete", handler: s.completeBatch},
		{pattern: "POST /v1/jobs/{id}/complete", handler: s.complete},
		{pattern: "POST /v1/jobs/{id}/fail", handler: s.fail},
		{pattern: "POST /v1/jobs/{id}/heartbeat", handler: s.heartbeat},
		{pattern: "POST /v1/jobs/{id}/release", handler: s.release},
		{pattern: "POST /v1/jobs/{id}/snooze", handler: s.snooze},
		{pattern: "POST /v1/jobs/{id}/cancel", handler: s.cancel},
		{pattern: "POST /v1/jobs/{id}/retry", handler: s.retry},
		{pattern: "POST /v1/jobs/{id}/run", handler: s.runJob},
		{pattern: "POST /v1/bulk/retry", handler: s.bulkRetry},
		{pattern: "POST /v1/bulk/cancel", handler: s.bulkCancel},
		{pattern: "POST /v1/bulk/delete", handler: s.bulkDelete},
		{pattern: "GET /v1/stats", handler: s.stats},
		{pattern: "GET /v1/queues", handler: s.queues},
		{pattern: "POST /v1/queues/{name}/pause", handler: s.pauseQueue},
		{pattern: "POST /v1/queues/{name}/resume", handler: s.resumeQueue},
		{pattern: "GET /v1/schedules", handler: s.listSchedules},
		{pattern: "GET /v1/schedules/{name}", handler: s.getSchedule},
		{pattern: "PUT /v1/schedules/{name}", handler: s.putSchedule},
		{pattern: "DELETE /v1/schedules/{name}", handler: s.deleteSchedule},
		{pattern: "POST /v1/schedules/{name}/pause", handler: s.pauseSchedule},
		{pattern: "POST /v1/schedules/{name}/resume", handler: s.resumeSchedule},
		{pattern: "POST /v1/schedules/{name}/run", handler: s.runSchedule},
		{pattern: "GET /v1/limits", handler: s.listLimits},
		{pattern: "GET /v1/limits/{key}", handler: s.getLimit},
		{pattern: "PUT /v1/limits/{key}", handler: s.putLimit},
		{pattern: "DELETE /v1/limits/{key}", handler: s.deleteLimit},
		{pattern: "POST /v1/limits/{key}/tokens", handler: s.takeTokens},
	}
	if cfg.Registry != nil {
		prom := promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{ErrorLog: slogPromLogger{s.log}})
		s.routes = append(s.routes, route{pattern: "GET /metrics", handler: prom.ServeHTTP})
	}
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.pattern, rt.handler)
		s.open[rt.pattern] = rt.open
		if _, path, _ := strings.Cut(rt.pattern, " "); !rt.query && strings.HasPrefix(path, "/v1") {
			s.noQuery[rt.pattern] = true
		}
	}
	return s, nil
}

// slogPromLogger adapts slog to promhttp's error logger.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) { l.log.Error("metrics: " + fmt.Sprint(v...)) }

// statusWriter records the status code a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// captureWriter swallows what the mux writes for an unmatched request so it
// can be replaced by a JSON error.
type captureWriter struct {
	header http.Header
	status int
}

func (w *captureWriter) Header() http.Header { return w.header }
func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}

// ServeHTTP turns away requests a web page may have made, authenticates
// the rest, routes them and logs them.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// Not every ResponseWriter supports deadlines (httptest's recorder
	// does not); net/http's server does.
	_ = http.NewResponseController(w).SetWriteDeadline(start.Add(s.writeDL))
	sw := &statusWriter{ResponseWriter: w}
	h, pattern := s.mux.Handler(r)
	switch ae := s.checkOrigin(r); {
	case ae != nil:
		s.writeError(sw, r, ae)
	case pattern != "" && s.open[pattern]:
		s.mux.ServeHTTP(sw, r)
	default:
		if ae, wait := s.authorize(r); ae != nil {
			switch ae.Status {
			case http.StatusUnauthorized:
				sw.Header().Set("WWW-Authenticate", `Bearer realm="readpast"`)
			case http.StatusTooManyRequests:
				sw.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
			}
			s.writeError(sw, r, ae)
			break
		}
		if pattern == "" {
			cw := &captureWriter{header: http.Header{}}
			h.ServeHTTP(cw, r)
			if allow := cw.header.Get("Allow"); allow != "" {
				sw.Header().Set("Allow", allow)
			}
			if cw.status == http.StatusMethodNotAllowed {
				s.writeError(sw, r, &apiError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
					Message: "method not allowed on this route"})
			} else {
				s.writeError(sw, r, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such route"})
			}
			break
		}
		if ae := s.checkQuery(r, pattern); ae != nil {
			s.writeError(sw, r, ae)
			break
		}
		s.mux.ServeHTTP(sw, r)
	}
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	took := time.Since(start)
	s.metrics.request(pattern, sw.status, took)
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", pattern),
		slog.Int("status", sw.status),
		slog.Duration("took", took))
}

// checkQuery refuses a query string on a /v1 route that reads none: its
// parameters would be ignored, the request taken to mean what it does not
// say (POST /v1/jobs?queue=mail enqueueing to the default queue). It
// names the first parameter in sorted order, as the routes that read a
// query name one they do not know.
func (s *server) checkQuery(r *http.Request, pattern string) *apiError {
	if r.URL.RawQuery == "" || !s.noQuery[pattern] {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: "malformed query string"}
	}
	if len(q) == 0 {
		return nil // "?&": no parameter
	}
	return fieldError(slices.Min(slices.Collect(maps.Keys(q))), "unknown query parameter: this route takes none")
}

// writeJSON writes v as the JSON response body with status.
func (s *server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, r, &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "internal error", cause: fmt.Errorf("encode response: %w", err)})
		return
	}
	s.writeBody(w, r, status, append(body, '\n'))
}

// writeBody writes body, JSON ending in a newline, as the response with
// status.
func (s *server) writeBody(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		s.log.DebugContext(r.Context(), "write response", slog.Any("error", err))
	}
}

// writeError writes ae as a JSON error, logging the cause of server errors.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if ae.Status >= 500 {
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", ae.Status),
			slog.Any("error", ae.cause))
	}
	body, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field}})
	h := w.Header()
	if ae.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfterSeconds)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(ae.Status)
	_, _ = w.Write(append(body, '\n'))
}

// writeStoreError writes the response for err, which came from the store.
// It writes nothing when the client is gone.
func (s *server) writeStoreError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		s.log.DebugContext(r.Context(), "client went away", slog.String("path", r.URL.Path), slog.Any("error", err))
		return
	}
	s.writeError(w, r, s.storeError(err))
}

// readBody reads the request body up to the configured limit.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
				Message: fmt.Sprintf("request body is larger than %d bytes", s.maxBody)}
		}
		return nil, &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON,
			Message: "could not read the request body", cause: err}
	}
	return body, nil
}

// pathID parses the {id} path value.
func pathID(r *http.Request) (int64, *apiError) {
	return parseID(r.PathValue("id"))
}

// Info is the answer to GET /v1: which server this is. The version is the
// one `readpast version`, the dashboard's footer and the
// readpast_build_info metric report.
type Info struct {
	Name      string `json:"name"` // "readpast"
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"go_version"`
}

func (s *server) info(w http.ResponseWriter, r *http.Request) {
	bi := buildinfo.Get()
	s.writeJSON(w, r, http.StatusOK, Info{Name: "readpast", Version: bi.Version, Revision: bi.Revision, GoVersion: bi.GoVersion})
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	// A lookup by primary key is the cheapest query that proves the store
	// is reachable and its schema is in place.
	if _, err := s.store.Get(ctx, 1); err != nil && !errors.Is(err, readpast.ErrNotFound) {
		s.log.WarnContext(ctx, "readiness check failed", slog.Any("error", err))
		s.writeError(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the database is unavailable"})
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *server) openapi(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc)
}

// writeContext returns the context for the store writes made for r: r's
// values without its cancellation, bounded by writeTimeout. Once a write is
// sent it runs to its end even if the client disconnects, so that what the
// database holds and what the handler saw (and counted in its metrics)
// agree; a write cancelled mid-statement may commit while reporting an
// error. Reads keep using r's context.
func writeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), writeTimeout)
}
