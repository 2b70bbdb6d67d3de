package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/readpast/readpast/internal/otlptest"
	"github.com/readpast/readpast/internal/testbin"
)

// traceWait bounds each worker process and each wait for spans.
const traceWait = 30 * time.Second

// TestTraceAcrossClients follows ONE job's trace through four processes
// in three languages, all exporting to one OTLP receiver in this test:
//
//  1. this Go process (service go-producer) enqueues the job over HTTP
//     inside a span of its own, passing it as the traceparent header;
//  2. `readpast serve` (service readpast-serve) makes its "send <queue>"
//     producer span a child of the header's context, and the job carries
//     the send span's context;
//  3. a Python worker (trace/pyworker.py, service python-worker; the
//     readpast package's Worker, its on_process hook making the span and
//     posting it as OTLP/JSON) fails attempt 1;
//  4. a TypeScript worker (trace/tsworker.mjs, service ts-worker;
//     @readpast/client's Worker with the OpenTelemetry SDK) runs attempt
//     2, made due at once with POST /v1/jobs/{id}/run, and succeeds.
//
// Every span must be in the Go span's trace; the send span's parent is
// the Go span; both process spans' parent is the send span (the job's
// creation context), the Python one linked to it too
// (docs/design/tracing.md); the TypeScript handler's own span is a child
// of its process span. A hop that drops the context fails it.
func TestTraceAcrossClients(t *testing.T) {
	python := pythonPath(t)
	node := tool(t, "node")
	tsPkg.Build(t)
	here, err := filepath.Abs("trace")
	if err != nil {
		t.Fatal(err)
	}
	installTraceDeps(t, here)
	pySrc, err := filepath.Abs(filepath.Join("..", "python", "src"))
	if err != nil {
		t.Fatal(err)
	}

	recv := otlptest.Start(t)
	srv := readpastBin.Serve(t, testbin.ServeOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL,
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_SERVICE_NAME=readpast-serve",
	}})
	queue := "traced"
	workerEnv := []string{
		"READPAST_URL=" + srv.URL, "READPAST_TOKEN=" + srv.Token,
		"TRACE_QUEUE=" + queue, "TRACE_OTLP_URL=" + recv.TracesURL(),
	}

	// 1. Go: a span of this process, its context sent as the header.
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(recv.TracesURL()))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "go-producer"))))
	defer tp.Shutdown(context.Background())
	ctx, goSpan := tp.Tracer("readpast-trace-test").Start(context.Background(), "go enqueue", trace.WithSpanKind(trace.SpanKindClient))
	hdr := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, hdr)
	var job traceJob
	srv.Call(t, "POST", "/v1/jobs", `{"kind":"traced","queue":"`+queue+`","max_attempts":2}`, hdr, http.StatusCreated, &job)
	goSpan.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	goTrace, goID := goSpan.SpanContext().TraceID().String(), goSpan.SpanContext().SpanID().String()
	carried := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": job.Traceparent}))
	if !carried.IsValid() {
		t.Fatalf("the enqueued job carries no valid traceparent: %+v", job)
	}
	jobID := strconv.FormatInt(job.ID, 10)

	// 3. Python fails attempt 1.
	out := runTraceWorker(t, "python", here, []string{python, filepath.Join(here, "pyworker.py")},
		append(workerEnv, "PYTHONPATH="+pySrc, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"))
	t.Logf("python worker: %s", out)
	srv.Call(t, "GET", "/v1/jobs/"+jobID, "", nil, http.StatusOK, &job)
	if job.State != "pending" || job.Attempt != 1 || len(job.Errors) != 1 || !strings.Contains(job.Errors[0].Message, "fails on purpose") {
		t.Fatalf("after the Python worker the job is %+v, want pending after attempt 1 with its error", job)
	}
	srv.Call(t, "POST", "/v1/jobs/"+jobID+"/run", "", nil, http.StatusOK, nil)

	// 4. TypeScript succeeds at attempt 2.
	out = runTraceWorker(t, "typescript", here, []string{node, filepath.Join(here, "tsworker.mjs")}, workerEnv)
	t.Logf("typescript worker: %s", out)
	srv.Call(t, "GET", "/v1/jobs/"+jobID, "", nil, http.StatusOK, &job)
	if job.State != "succeeded" || job.Attempt != 2 {
		t.Fatalf("after the TypeScript worker the job is %+v, want succeeded at attempt 2", job)
	}

	// The spans, as the receiver got them.
	of := func(service, name string) otlptest.Span {
		return recv.Wait(t, traceWait, fmt.Sprintf("%q of %s", name, service), func(s otlptest.Span) bool {
			return s.Service == service && s.Name == name
		})
	}
	goGot := of("go-producer", "go enqueue")
	send := of("readpast-serve", "send "+queue)
	py := of("python-worker", "process "+queue)
	ts := of("ts-worker", "process "+queue)
	tsWork := of("ts-worker", "ts handler work")

	if goGot.TraceID != goTrace || goGot.SpanID != goID || goGot.ParentSpanID != "" {
		t.Errorf("Go span %s: want the root span %s of trace %s", goGot, goID, goTrace)
	}
	if send.ParentSpanID != goID || send.Kind != tracepb.Span_SPAN_KIND_PRODUCER || send.Attributes["messaging.message.id"] != jobID {
		t.Errorf("server's send span %s: want a producer span, child of the Go span %s, for job %s (attributes %v)",
			send, goID, jobID, send.Attributes)
	}
	if send.TraceID != carried.TraceID().String() || send.SpanID != carried.SpanID().String() {
		t.Errorf("the job carries %q, not the server's send span %s", job.Traceparent, send)
	}
	for _, c := range []struct {
		span    otlptest.Span
		attempt int64
		linked  bool // must link to the creation context (else: may)
	}{{py, 1, true}, {ts, 2, false}} {
		s := c.span
		if s.ParentSpanID != send.SpanID || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
			t.Errorf("%s: want a consumer span whose parent is the job's creation context, the send span %s", s, send.SpanID)
		}
		if s.Attributes["messaging.message.id"] != jobID || !attrIs(s.Attributes["readpast.job.attempt"], c.attempt) {
			t.Errorf("%s: attributes %v, want job %s attempt %d", s, s.Attributes, jobID, c.attempt)
		}
		if c.linked && len(s.Links) != 1 {
			t.Errorf("%s: %d links, want one to the creation context", s, len(s.Links))
		}
		for _, l := range s.Links {
			if l.TraceID != goTrace || l.SpanID != send.SpanID {
				t.Errorf("%s links to %s/%s, want the creation context %s", s, l.TraceID, l.SpanID, send.SpanID)
			}
		}
	}
	if py.StatusCode != tracepb.Status_STATUS_CODE_ERROR || ts.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("status of the failed attempt %v, of the successful one %v", py.StatusCode, ts.StatusCode)
	}
	if tsWork.ParentSpanID != ts.SpanID {
		t.Errorf("the TypeScript handler's span %s: want a child of its process span %s", tsWork, ts.SpanID)
	}

	// One trace, four services, no span twice.
	services := map[string]int{}
	ids := map[string]bool{}
	for _, s := range recv.Spans() {
		services[s.Service]++
		if s.TraceID != goTrace {
			t.Errorf("span %s is not in the Go span's trace %s", s, goTrace)
		}
		if ids[s.SpanID] {
			t.Errorf("span ID %s received twice", s.SpanID)
		}
		ids[s.SpanID] = true
	}
	for _, name := range []string{"go-producer", "readpast-serve", "python-worker", "ts-worker"} {
		if services[name] == 0 {
			t.Errorf("no span of service %s (spans by service: %v)", name, services)
		}
	}
}

// traceJob is what the test reads of a job.
type traceJob struct {
	ID          int64  `json:"id"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	Traceparent string `json:"traceparent"`
	Errors      []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// attrIs reports whether an attribute's value is the integer want (an
// int64, or a float64 from an SDK that sends numbers as doubles).
func attrIs(v any, want int64) bool {
	switch v := v.(type) {
	case int64:
		return v == want
	case float64:
		return v == float64(want)
	}
	return false
}

// runTraceWorker runs a worker process in dir until it exits, within
// traceWait, and returns its standard output; a failure or a timeout
// fails t with both outputs. Its environment is this process's without
// READPAST_ and OTEL_ variables, plus env.
func runTraceWorker(t *testing.T, name, dir string, argv, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), traceWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	for _, kv := range testbin.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("still running after %s: %w", traceWait, err)
		}
		t.Fatalf("%s worker (%s): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(argv, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("%s worker took %s", name, time.Since(start).Round(time.Millisecond))
	return strings.TrimSpace(stdout.String())
}

// installTraceDeps installs the OpenTelemetry SDK of trace/package.json
// (npm ci from its package-lock.json) when node_modules is missing or
// older than the lock file, holding an exclusive lock on
// trace/.install.lock meanwhile, since other test processes may run this
// test at the same time. npm's cache goes in trace/.npm-cache. Without
// npm it skips t (fails it under CI=true).
func installTraceDeps(t *testing.T, dir string) {
	t.Helper()
	npm := tool(t, "npm")
	f, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		t.Fatalf("flock %s: %v", f.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()

	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err == nil && !lock.ModTime().After(installed.ModTime()) {
		return
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(testbin.Environ(), "npm_config_cache="+filepath.Join(dir, ".npm-cache"),
		"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	t.Logf("npm ci in %s took %s", dir, time.Since(start).Round(time.Millisecond))
}
