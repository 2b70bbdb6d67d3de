package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/readpast/readpast"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTracestate  = "congo=t61rcWkgMzE"
)

// TestTraceHeadersStoredOnJobs: without tracing on the server, the
// traceparent and tracestate headers of an enqueue (one job or a batch)
// are stored on the jobs as they are, and the claim response returns
// them; a job enqueued without them has none; malformed ones are refused,
// naming the header, and enqueue nothing.
func TestTraceHeadersStoredOnJobs(t *testing.T) {
	e := newEnv(t, nil)
	hdr := map[string]string{"Content-Type": "application/json", "traceparent": testTraceparent, "tracestate": testTracestate}
	status, body := e.request(context.Background(), "POST", "/v1/jobs", `{"kind":"k","queue":"t"}`, "", "", hdr)
	if status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", status, body)
	}
	var one Job
	mustUnmarshal(t, body, &one)
	if one.Traceparent != testTraceparent || one.Tracestate != testTracestate {
		t.Fatalf("enqueued job: %q %q", one.Traceparent, one.Tracestate)
	}
	status, body = e.request(context.Background(), "POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","queue":"t"},{"kind":"k","queue":"t"}]}`, "", "", hdr)
	if status != http.StatusCreated {
		t.Fatalf("batch: %d %s", status, body)
	}
	plain := e.enqueue(`{"kind":"k","queue":"t"}`)
	if plain.Traceparent != "" {
		t.Fatalf("job enqueued without headers has traceparent %q", plain.Traceparent)
	}
	jobs := e.claim(`{"queues":["t"],"worker":"w","limit":10,"lease_seconds":60}`)
	if len(jobs) != 4 {
		t.Fatalf("claimed %d jobs, want 4", len(jobs))
	}
	for _, j := range jobs {
		want := testTraceparent
		if j.ID == plain.ID {
			want = ""
		}
		if j.Traceparent != want || (want != "" && j.Tracestate != testTracestate) {
			t.Errorf("claimed job %d: %q %q, want %q", j.ID, j.Traceparent, j.Tracestate, want)
		}
	}
	raw := e.must("POST", "/v1/jobs", `{"kind":"k"}`, http.StatusCreated, nil)
	if strings.Contains(string(raw), "traceparent") {
		t.Errorf("untraced job's JSON names traceparent: %s", raw)
	}

	for _, tc := range []struct {
		hdr   map[string]string
		field string
	}{
		{map[string]string{"traceparent": "00-bad"}, "traceparent"},
		{map[string]string{"tracestate": "a=b"}, "tracestate"},
		{map[string]string{"traceparent": testTraceparent, "tracestate": "no good"}, "tracestate"},
	} {
		tc.hdr["Content-Type"] = "application/json"
		for _, path := range []string{"/v1/jobs", "/v1/jobs/batch"} {
			body := `{"kind":"k","queue":"bad"}`
			if path == "/v1/jobs/batch" {
				body = `{"jobs":[` + body + `]}`
			}
			status, got := e.request(context.Background(), "POST", path, body, "", "", tc.hdr)
			checkError(t, path, status, got, http.StatusBadRequest, CodeInvalidField, tc.field)
		}
	}
	if n := len(e.claim(`{"queues":["bad"],"worker":"w","limit":10,"lease_seconds":60}`)); n != 0 {
		t.Fatalf("refused enqueues left %d jobs", n)
	}
}

// TestTracedServerSpans: with WithTracing, an enqueue's producer span is a
// child of the request's traceparent and the job keeps that span's
// context, which the claim returns.
func TestTracedServerSpans(t *testing.T) {
	e := newEnv(t, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tr, err := readpast.NewTracing(tp, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: e.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(WithTracing(h, tr))
	defer srv.Close()
	e.srv = srv

	hdr := map[string]string{"Content-Type": "application/json", "traceparent": testTraceparent, "tracestate": testTracestate}
	status, body := e.request(context.Background(), "POST", "/v1/jobs", `{"kind":"k","queue":"t"}`, "", "", hdr)
	if status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", status, body)
	}
	var job Job
	mustUnmarshal(t, body, &job)
	var send sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "send t" {
			send = s
		}
	}
	if send == nil {
		t.Fatalf("no send span among %d", len(rec.Ended()))
	}
	incoming := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": testTraceparent, "tracestate": testTracestate}))
	if send.Parent().SpanID() != incoming.SpanID() || send.SpanContext().TraceID() != incoming.TraceID() {
		t.Errorf("send span's parent %v in trace %v, want the header's %v in %v", send.Parent().SpanID(), send.SpanContext().TraceID(), incoming.SpanID(), incoming.TraceID())
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), send.SpanContext()), c)
	if job.Traceparent != c["traceparent"] || job.Traceparent == testTraceparent || job.Tracestate != testTracestate {
		t.Errorf("job keeps %q %q, want the server span's %q and the tracestate", job.Traceparent, job.Tracestate, c["traceparent"])
	}
	claimed := e.claim(`{"queues":["t"],"worker":"w","limit":1,"lease_seconds":60}`)
	if len(claimed) != 1 || claimed[0].Traceparent != job.Traceparent {
		t.Fatalf("claim returned %+v, want traceparent %q", claimed, job.Traceparent)
	}
}
