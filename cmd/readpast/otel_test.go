package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readpast/readpast/internal/testbin"
)

// otelBin is the readpast binary the tracing tests serve.
var otelBin testbin.Readpast

// otlpReceiver is an OTLP/HTTP trace receiver on a loopback port: it
// decodes each export request and keeps its spans, with their resource's
// service.name.
type otlpReceiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s (%s), want POST /v1/traces of protobuf", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &msg); err != nil {
			t.Errorf("OTLP request does not decode: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, receivedSpan{service: service, span: s})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the first span named name, waiting up to d for it.
func (r *otlpReceiver) wait(t *testing.T, name string, d time.Duration) receivedSpan {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		for _, s := range r.spans {
			if s.span.Name == name {
				r.mu.Unlock()
				return s
			}
		}
		n := len(r.spans)
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no span %q exported within %s (%d others)", name, d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiCall sends a JSON request to srv with hdr and decodes the answer.
func apiCall(t *testing.T, srv *testbin.Server, path, body string, hdr map[string]string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}

type tracedJob struct {
	ID          int64  `json:"id"`
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
}

// TestServeTracing runs the tracing tests of readpast serve on one build
// of the binary, removed at the end.
func TestServeTracing(t *testing.T) {
	defer otelBin.Remove()
	t.Run("exports", testServeExportsTraces)
	t.Run("grpc refused", testServeRefusesOTLPgRPC)
}

// testServeExportsTraces: a process enqueues inside a span of its own
// through `readpast serve` configured by the standard OTEL_ variables;
// serve exports, over OTLP http/protobuf, a producer span that is a child
// of the caller's span, under OTEL_SERVICE_NAME, and a claim returns that
// span's context as the job's traceparent: the IDs match across the three
// processes. A server stopped with spans still buffered flushes them.
func testServeExportsTraces(t *testing.T) {
	recv := newOTLPReceiver(t)
	srv := otelBin.Serve(t, testbin.ServeOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.srv.URL,
		"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=readpast-under-test",
	}})

	// This process's span, propagated as W3C headers.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	hdr := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, hdr)
	caller.End()

	var job tracedJob
	apiCall(t, srv, "/v1/jobs", `{"kind":"k","queue":"traced"}`, hdr, http.StatusCreated, &job)
	got := recv.wait(t, "send traced", 15*time.Second)
	span := got.span
	callerSC := caller.SpanContext()
	if hex.EncodeToString(span.TraceId) != callerSC.TraceID().String() || hex.EncodeToString(span.ParentSpanId) != callerSC.SpanID().String() {
		t.Fatalf("exported send span: trace %x parent %x, want the caller's trace %s and span %s",
			span.TraceId, span.ParentSpanId, callerSC.TraceID(), callerSC.SpanID())
	}
	if span.Kind != tracepb.Span_SPAN_KIND_PRODUCER || got.service != "readpast-under-test" {
		t.Errorf("exported send span: kind %v, service %q; want producer, readpast-under-test", span.Kind, got.service)
	}
	attrs := map[string]string{}
	for _, kv := range span.Attributes {
		attrs[kv.Key] = kv.GetValue().GetStringValue()
	}
	if attrs["messaging.system"] != "readpast" || attrs["messaging.destination.name"] != "traced" || attrs["messaging.operation.type"] != "send" {
		t.Errorf("exported send span's attributes %v", attrs)
	}

	var claimed struct{ Jobs []tracedJob }
	apiCall(t, srv, "/v1/claim", `{"queues":["traced"],"worker":"w","limit":1,"lease_seconds":60}`, nil, http.StatusOK, &claimed)
	if len(claimed.Jobs) != 1 {
		t.Fatalf("claimed %d jobs", len(claimed.Jobs))
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": claimed.Jobs[0].Traceparent}))
	if sc.TraceID().String() != callerSC.TraceID().String() || sc.SpanID().String() != hex.EncodeToString(span.SpanId) {
		t.Fatalf("claimed job's traceparent %q, want trace %s and the server's span %x", claimed.Jobs[0].Traceparent, callerSC.TraceID(), span.SpanId)
	}
	if job.Traceparent != claimed.Jobs[0].Traceparent {
		t.Errorf("enqueue answered traceparent %q, the claim %q", job.Traceparent, claimed.Jobs[0].Traceparent)
	}

	// Spans still buffered when the server stops are flushed.
	slow := otelBin.Serve(t, testbin.ServeOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + recv.srv.URL + "/v1/traces",
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}})
	apiCall(t, slow, "/v1/jobs/batch", `{"jobs":[{"kind":"k","queue":"flushed"}]}`, hdr, http.StatusCreated, nil)
	if err := syscall.Kill(slow.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if s := recv.wait(t, "send flushed", 15*time.Second); s.service != "readpast" {
		t.Errorf("flushed span's service %q, want the default readpast", s.service)
	}
}

// testServeRefusesOTLPgRPC: serve exports over http/protobuf only; asked
// for gRPC it refuses to start and says what to set.
func testServeRefusesOTLPgRPC(t *testing.T) {
	cmd := exec.Command(otelBin.Path(t), "serve", "--addr", "127.0.0.1:0", "--database-url", t.TempDir()+"/r.db")
	cmd.Env = append(testbin.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc") || !strings.Contains(stderr.String(), "http/protobuf") {
			t.Fatalf("serve with OTLP gRPC: %v, %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("serve with OTEL_EXPORTER_OTLP_PROTOCOL=grpc did not exit")
	}
}
