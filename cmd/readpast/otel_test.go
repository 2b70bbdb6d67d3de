package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/readpast/readpast/internal/otlptest"
	"github.com/readpast/readpast/internal/testbin"
)

// otelBin is the readpast binary the tracing tests serve.
var otelBin testbin.Readpast

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
	recv := otlptest.Start(t)
	srv := otelBin.Serve(t, testbin.ServeOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL,
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
	srv.Call(t, "POST", "/v1/jobs", `{"kind":"k","queue":"traced"}`, hdr, http.StatusCreated, &job)
	span := recv.WaitName(t, 15*time.Second, "send traced")
	callerSC := caller.SpanContext()
	if span.TraceID != callerSC.TraceID().String() || span.ParentSpanID != callerSC.SpanID().String() {
		t.Fatalf("exported send span %s: want the caller's trace %s and span %s", span, callerSC.TraceID(), callerSC.SpanID())
	}
	if span.Kind != tracepb.Span_SPAN_KIND_PRODUCER || span.Service != "readpast-under-test" || span.Encoding != otlptest.Protobuf {
		t.Errorf("exported send span %s, sent as %s; want a producer span of readpast-under-test, sent as protobuf", span, span.Encoding)
	}
	attrs := span.Attributes
	if attrs["messaging.system"] != "readpast" || attrs["messaging.destination.name"] != "traced" || attrs["messaging.operation.type"] != "send" {
		t.Errorf("exported send span's attributes %v", attrs)
	}

	var claimed struct{ Jobs []tracedJob }
	srv.Call(t, "POST", "/v1/claim", `{"queues":["traced"],"worker":"w","limit":1,"lease_seconds":60}`, nil, http.StatusOK, &claimed)
	if len(claimed.Jobs) != 1 {
		t.Fatalf("claimed %d jobs", len(claimed.Jobs))
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": claimed.Jobs[0].Traceparent}))
	if sc.TraceID().String() != callerSC.TraceID().String() || sc.SpanID().String() != span.SpanID {
		t.Fatalf("claimed job's traceparent %q, want trace %s and the server's span %s", claimed.Jobs[0].Traceparent, callerSC.TraceID(), span.SpanID)
	}
	if job.Traceparent != claimed.Jobs[0].Traceparent {
		t.Errorf("enqueue answered traceparent %q, the claim %q", job.Traceparent, claimed.Jobs[0].Traceparent)
	}

	// Spans still buffered when the server stops are flushed.
	slow := otelBin.Serve(t, testbin.ServeOptions{Env: []string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + recv.TracesURL(),
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}})
	slow.Call(t, "POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","queue":"flushed"}]}`, hdr, http.StatusCreated, nil)
	if err := syscall.Kill(slow.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if s := recv.WaitName(t, 15*time.Second, "send flushed"); s.Service != "readpast" {
		t.Errorf("flushed span's service %q, want the default readpast", s.Service)
	}
	// The span arrives before serve has exited: let it exit before the
	// test's cleanup signals it again.
	for deadline := time.Now().Add(15 * time.Second); syscall.Kill(slow.Pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("readpast serve (pid %d) still runs 15s after SIGTERM", slow.Pid)
		}
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
