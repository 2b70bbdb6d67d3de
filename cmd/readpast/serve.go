package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/dashboard"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/stores"
)

// Environment variables serve reads tokens from, comma-separated.
const (
	envTokens     = "READPAST_TOKENS"
	envReadTokens = "READPAST_READ_TOKENS"
)

// stringList is a repeatable string flag; an empty value is refused.
type stringList []string

func (l *stringList) String() string { return fmt.Sprint(len(*l)) + " values" }

func (l *stringList) Set(s string) error {
	if s == "" {
		return errors.New("is empty: give a value, or leave the flag out")
	}
	*l = append(*l, s)
	return nil
}

// runServe serves the HTTP API until SIGINT or SIGTERM, then shuts down
// gracefully: it stops accepting connections, ends long-polling claims,
// waits for requests in flight (up to --shutdown-timeout), and closes the
// store. It also runs the lease rescuer, retention and the scheduler of
// the stored schedules in the background.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve [flags]", stdout)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port)")
	dbURL := dbFlag(fs)
	noMigrate := fs.Bool("no-migrate", false, "do not migrate the database at start")
	var tokens, readTokens stringList
	fs.Var(&tokens, "token", "bearer token with full access, at least 16 bytes (openssl rand -hex 32 makes one); repeatable (also $"+envTokens+", comma-separated)")
	fs.Var(&readTokens, "read-token", "bearer token that may only GET, at least 16 bytes; repeatable (also $"+envReadTokens+")")
	var allowedHosts stringList
	fs.Var(&allowedHosts, "allowed-host", "with auth off, a host name to answer in the Host header besides localhost and loopback addresses; repeatable")
	var trustedProxies stringList
	fs.Var(&trustedProxies, "trusted-proxy",
		"address or CIDR range of a reverse proxy in front of the server, whose X-Forwarded-For and X-Forwarded-Proto are believed; repeatable (none by default)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	maxBody := fs.Int64("max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest request body accepted")
	maxBatch := fs.Int("max-batch", httpapi.DefaultMaxBatch, "most jobs in one batch enqueue")
	maxSnoozes := fs.Int("max-snoozes", readpast.DefaultMaxSnoozes, "most times POST /v1/jobs/{id}/snooze may snooze one job (409 snooze_limit past it)")
	maxResponse := fs.Int64("max-response-bytes", httpapi.DefaultMaxResponseBytes,
		"byte budget of a list or claim response: fewer jobs (and a cursor) beyond it")
	writeTimeout := fs.Duration("write-timeout", httpapi.DefaultWriteTimeout,
		"how long a client may take to read a response (a long poll's wait is added)")
	noMetrics := fs.Bool("no-metrics", false, "do not serve Prometheus metrics at /metrics")
	noDashboard := fs.Bool("no-dashboard", false, "do not serve the web dashboard at /")
	dashRefresh := fs.Duration("dashboard-refresh", dashboard.DefaultRefreshInterval,
		"how often the dashboard's overview refreshes its figures while someone looks at it (at least)")
	metricsQueues := fs.Int("metrics-max-queues", httpapi.DefaultMetricsMaxQueues,
		"queues with series of their own in /metrics; the rest are summed under queue=\"_other\"")
	metricsKinds := fs.Int("metrics-max-kinds", httpapi.DefaultMetricsMaxKinds,
		"kinds with series of their own in /metrics; the rest are counted under kind=\"_other\"")
	rescueEvery := fs.Duration("rescue-interval", readpast.DefaultRescueInterval, "how often to rescue jobs whose lease expired")
	scheduleEvery := fs.Duration("schedule-interval", readpast.DefaultScheduleInterval,
		"how often the scheduler looks for due ticks of the stored schedules (0 runs no scheduler here)")
	idemFor := fs.Duration("idempotency-period", httpapi.DefaultIdempotencyPeriod,
		"how long an Idempotency-Key of POST /v1/jobs holds, whatever the job's outcome")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "how long to wait for requests in flight at shutdown")
	var keep readpast.Retention
	fs.DurationVar(&keep.Succeeded, "keep-succeeded", 7*24*time.Hour, "delete succeeded jobs older than this (0 keeps them)")
	fs.DurationVar(&keep.Failed, "keep-failed", 30*24*time.Hour, "delete failed jobs older than this (0 keeps them)")
	fs.DurationVar(&keep.Cancelled, "keep-cancelled", 7*24*time.Hour, "delete cancelled jobs older than this (0 keeps them)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *maxBody < 1 || *maxBatch < 1 || *maxResponse < 1 {
		return usagef("--max-body-bytes, --max-batch and --max-response-bytes must be positive")
	}
	if *maxSnoozes < 1 {
		return usagef("--max-snoozes must be positive")
	}
	if *writeTimeout <= 0 {
		return usagef("--write-timeout must be positive")
	}
	if *metricsQueues < 1 || *metricsKinds < 1 {
		return usagef("--metrics-max-queues and --metrics-max-kinds must be positive")
	}
	if keep.Succeeded < 0 || keep.Failed < 0 || keep.Cancelled < 0 {
		return usagef("--keep-succeeded, --keep-failed and --keep-cancelled must not be negative")
	}
	if *dashRefresh < time.Second {
		return usagef("--dashboard-refresh must be at least 1s")
	}
	if *scheduleEvery < 0 {
		return usagef("--schedule-interval must not be negative (0 runs no scheduler)")
	}
	if *idemFor <= 0 || *idemFor > readpast.MaxUniqueFor {
		return usagef("--idempotency-period must be between 1ns and %s", readpast.MaxUniqueFor)
	}
	if *rescueEvery <= 0 {
		return usagef("--rescue-interval must be positive (expired leases are rescued that often)")
	}
	if *shutdownTimeout <= 0 {
		return usagef("--shutdown-timeout must be positive")
	}

	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	if err := checkTokens(splitTokens(os.Getenv(envTokens)), "$"+envTokens, cleanTokens(tokens), "--token"); err != nil {
		return err
	}
	if err := checkTokens(splitTokens(os.Getenv(envReadTokens)), "$"+envReadTokens, cleanTokens(readTokens), "--read-token"); err != nil {
		return err
	}
	full := append(splitTokens(os.Getenv(envTokens)), cleanTokens(tokens)...)
	read := append(splitTokens(os.Getenv(envReadTokens)), cleanTokens(readTokens)...)
	proxies, err := parseTrustedProxies(trustedProxies)
	if err != nil {
		return err
	}
	loopback, err := isLoopback(*addr)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	if len(full) == 0 && len(read) == 0 && !loopback {
		return usagef("refusing to serve on %s without authentication: set --token or $%s (auth may be off only on a loopback address)", *addr, envTokens)
	}

	hosts := cleanTokens(allowedHosts)
	if len(hosts) > 0 && len(full)+len(read) > 0 {
		log.Warn("--allowed-host has no effect with authentication on: any Host is answered")
	}
	if len(proxies) > 0 && len(full)+len(read) == 0 {
		log.Warn("--trusted-proxy has no effect with authentication off: there are no tokens to throttle and no login")
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Set up first, flushed last: after the server and the store stopped.
	tracing, flushTraces, err := setupTracing(ctx, log)
	if err != nil {
		return err
	}
	defer flushTraces()

	url := databaseURL(*dbURL)
	kind, _, err := stores.Parse(url)
	if err != nil {
		return usagef("--database-url: %v", err)
	}
	store, err := openForServe(ctx, url, *noMigrate, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Warn("close store", slog.Any("error", err))
		}
	}()

	var reg *prometheus.Registry
	if !*noMetrics {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// One throttle of failed authentication for the API and the
	// dashboard: a guesser's tries count together wherever they go.
	throttle, err := httpapi.NewThrottle(httpapi.ThrottleConfig{TrustedProxies: proxies, Registry: reg, Logger: log})
	if err != nil {
		return err
	}
	closing := make(chan struct{})
	handler, err := httpapi.New(httpapi.Config{
		Store:             store,
		Logger:            log,
		Registry:          reg,
		Tokens:            full,
		ReadTokens:        read,
		AllowedHosts:      hosts,
		Throttle:          throttle,
		MaxBodyBytes:      *maxBody,
		MaxBatch:          *maxBatch,
		MaxSnoozes:        *maxSnoozes,
		MaxResponseBytes:  *maxResponse,
		WriteTimeout:      *writeTimeout,
		IdempotencyPeriod: *idemFor,
		MetricsMaxQueues:  *metricsQueues,
		MetricsMaxKinds:   *metricsKinds,
		Closing:           closing,
	})
	if err != nil {
		return err
	}
	handler = httpapi.WithTracing(handler, tracing)
	if !*noDashboard {
		dash, err := dashboard.New(dashboard.Config{
			Store:           store,
			Logger:          log,
			Tokens:          full,
			ReadTokens:      read,
			AllowedHosts:    hosts,
			Throttle:        throttle,
			RefreshInterval: *dashRefresh,
		})
		if err != nil {
			return err
		}
		defer dash.Close() // before the store closes
		handler = withDashboard(handler, dash)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Maintenance: rescue expired leases, delete old finished jobs.
	maintCtx, stopMaint := context.WithCancel(context.WithoutCancel(ctx))
	var maint sync.WaitGroup
	maint.Go(func() { readpast.RunRescuer(maintCtx, store, *rescueEvery, log) })
	maint.Go(func() { readpast.RunRetention(maintCtx, store, keep, readpast.DefaultRetentionInterval, log) })
	if *scheduleEvery > 0 {
		sched := readpast.NewScheduler(store, readpast.SchedulerConfig{Interval: *scheduleEvery, Logger: log})
		if reg != nil {
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "readpast_schedule_fire_failures_total",
				Help: "Fires of a schedule that failed in this server's scheduler (each is logged); the other schedules still fire.",
			}, func() float64 { return float64(sched.Failures()) }))
		}
		maint.Go(func() { sched.Run(maintCtx) })
	}
	defer func() {
		stopMaint()
		maint.Wait()
	}()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening",
		slog.String("addr", ln.Addr().String()),
		slog.String("store", string(kind)),
		slog.String("database", stores.Redact(url)),
		slog.Bool("auth", len(full)+len(read) > 0),
		slog.Bool("metrics", reg != nil),
		slog.Bool("dashboard", !*noDashboard),
		slog.Bool("tracing", tracing != nil))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop() // a second signal kills the process the usual way
	log.Info("shutting down", slog.String("timeout", shutdownTimeout.String()))
	close(closing)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("stopped")
	return nil
}

// withDashboard serves the API's paths (/v1, /v1/..., /healthz, /readyz,
// /metrics) with api and every other path with the dashboard.
func withDashboard(api, dash http.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/v1", "/v1/", "/healthz", "/readyz", "/metrics"} {
		mux.Handle(p, api)
	}
	mux.Handle("/", dash)
	return mux
}

// openForServe opens the database serve runs on. It migrates it (creating
// a SQLite file that does not exist) unless noMigrate; with noMigrate the
// database must exist and its schema be the one this readpast uses, and
// serve refuses to start otherwise.
func openForServe(ctx context.Context, url string, noMigrate bool, log *slog.Logger) (readpast.Store, error) {
	if noMigrate {
		st, err := stores.OpenWith(ctx, url, stores.Options{Logger: log, Existing: true})
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: with --no-migrate the database must exist; run 'readpast migrate %s' first",
				stores.Redact(url), dbArg(url))
		}
		if err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		if err := checkSchema(ctx, st, url); err != nil {
			st.Close()
			return nil, err
		}
		return st, nil
	}
	st, err := stores.OpenWith(ctx, url, stores.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s: %w", stores.Redact(url), err)
	}
	return st, nil
}

// newLogger makes the slog logger for --log-format and --log-level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format must be text or json, not %q", format)
}

// splitTokens splits a comma-separated token list, dropping blanks.
func splitTokens(s string) []string {
	return cleanTokens(strings.Split(s, ","))
}

// cleanTokens trims tokens and drops blanks.
func cleanTokens(in []string) []string {
	var out []string
	for _, t := range in {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// checkTokens refuses tokens shorter than httpapi.MinTokenBytes, which
// could be found by trying. The tokens come from the environment variable
// env (fromEnv) and from the flag (fromFlag); the error says which, and
// never holds a token.
func checkTokens(fromEnv []string, env string, fromFlag []string, flag string) error {
	advice := fmt.Sprintf("a token must be at least %d bytes: make one with `openssl rand -hex 32`", httpapi.MinTokenBytes)
	for i, t := range fromEnv {
		if len(t) < httpapi.MinTokenBytes {
			return usagef("token %d of %s is %d bytes; %s", i+1, env, len(t), advice)
		}
	}
	for i, t := range fromFlag {
		if len(t) < httpapi.MinTokenBytes {
			return usagef("%s #%d is %d bytes; %s", flag, i+1, len(t), advice)
		}
	}
	return nil
}

// parseTrustedProxies reads the --trusted-proxy values: CIDR ranges, or
// single addresses.
func parseTrustedProxies(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range cleanTokens(values) {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, usagef("--trusted-proxy %q is not an address or a CIDR range (such as 10.0.0.0/8, 192.0.2.7 or fd00::/8)", v)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// isLoopback reports whether addr (host:port) listens only on a loopback
// address. An empty host means every interface, so it is not loopback.
// A port must be a number from 0 to 65535 (no service name), so that a
// bad one is refused before anything is opened.
func isLoopback(addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return false, fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
