package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestProtobufFromTheSDK: spans the Go SDK exports over OTLP/HTTP
// (protobuf, gzip and not) arrive with their IDs, parent, kind,
// attributes, links and service.name.
func TestProtobufFromTheSDK(t *testing.T) {
	for _, compress := range []bool{false, true} {
		recv := Start(t)
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(recv.TracesURL())}
		if compress {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		exp, err := otlptracehttp.New(context.Background(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "svc"))))
		tr := tp.Tracer("scope-a")
		ctx, parent := tr.Start(context.Background(), "parent")
		_, other := tr.Start(context.Background(), "other")
		other.End()
		_, child := tr.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithLinks(trace.Link{SpanContext: other.SpanContext()}),
			trace.WithAttributes(attribute.String("s", "v"), attribute.Int("i", 7), attribute.Bool("b", true),
				attribute.Float64("f", 1.5), attribute.StringSlice("l", []string{"x", "y"})))
		child.End()
		parent.End()
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}

		got := recv.WaitName(t, 5*time.Second, "child")
		psc, osc := parent.SpanContext(), other.SpanContext()
		if got.TraceID != psc.TraceID().String() || got.ParentSpanID != psc.SpanID().String() ||
			got.SpanID != child.SpanContext().SpanID().String() {
			t.Errorf("child %s: want trace %s, parent %s", got, psc.TraceID(), psc.SpanID())
		}
		if got.Service != "svc" || got.Scope != "scope-a" || got.Kind != tracepb.Span_SPAN_KIND_CONSUMER || got.Encoding != Protobuf {
			t.Errorf("child %s: scope %q, encoding %q", got, got.Scope, got.Encoding)
		}
		a := got.Attributes
		if a["s"] != "v" || a["i"] != int64(7) || a["b"] != true || a["f"] != 1.5 || len(a["l"].([]any)) != 2 {
			t.Errorf("child's attributes %v", a)
		}
		if len(got.Links) != 1 || got.Links[0].TraceID != osc.TraceID().String() || got.Links[0].SpanID != osc.SpanID().String() {
			t.Errorf("child's links %+v, want one to %s", got.Links, osc.SpanID())
		}
		if p := recv.WaitName(t, time.Second, "parent"); p.ParentSpanID != "" {
			t.Errorf("root span %s has a parent", p)
		}
		if n := len(recv.Spans()); n != 3 {
			t.Errorf("%d spans, want 3", n)
		}
	}
}

// jsonExport is an OTLP/JSON export request as the specification's
// example writes it: hex IDs, enums as integers, int64 as strings.
const jsonExport = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"py"}}]},
 "scopeSpans":[{"scope":{"name":"hand"},"spans":[{
  "traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","parentSpanId":"eee19b7ec3c1b173",
  "name":"process q","kind":5,"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000",
  "attributes":[{"key":"n","value":{"intValue":"2"}},{"key":"s","value":{"stringValue":"x"}}],
  "links":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b173"}],
  "status":{"code":2,"message":"boom"},"someFutureField":true}]}]}]}`

// TestJSON: an OTLP/JSON request, gzip or not, is read with its hex IDs,
// and answered in JSON.
func TestJSON(t *testing.T) {
	for _, compress := range []bool{false, true} {
		r := New()
		body := []byte(jsonExport)
		if compress {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write(body)
			_ = zw.Close()
			body = b.Bytes()
		}
		req := httptest.NewRequest("POST", TracesPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		if compress {
			req.Header.Set("Content-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("JSON export: %d %s %s (refused %v)", w.Code, w.Header().Get("Content-Type"), w.Body, r.Refused())
		}
		spans := r.Spans()
		if len(spans) != 1 {
			t.Fatalf("%d spans", len(spans))
		}
		s := spans[0]
		if s.TraceID != "5b8efff798038103d269b633813fc60c" || s.SpanID != "eee19b7ec3c1b174" || s.ParentSpanID != "eee19b7ec3c1b173" ||
			s.Service != "py" || s.Scope != "hand" || s.Kind != tracepb.Span_SPAN_KIND_CONSUMER || s.Encoding != JSON ||
			s.StatusCode != tracepb.Status_STATUS_CODE_ERROR || s.StatusMessage != "boom" {
			t.Errorf("span %s: scope %q, status %v %q", s, s.Scope, s.StatusCode, s.StatusMessage)
		}
		if s.Attributes["n"] != int64(2) || s.Attributes["s"] != "x" || len(s.Links) != 1 || s.Links[0].SpanID != "eee19b7ec3c1b173" {
			t.Errorf("span's attributes %v, links %+v", s.Attributes, s.Links)
		}
	}
}

// TestRefused: what is not a valid trace export is refused with a clear
// status and kept in Refused, and no span of it is kept.
func TestRefused(t *testing.T) {
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		says                            string
	}{
		{"wrong path", "POST", "/v1/metrics", "application/json", "{}", 404, "/v1/traces"},
		{"GET", "GET", TracesPath, "application/json", "", 405, "POST"},
		{"text", "POST", TracesPath, "text/plain", "{}", 415, "Content-Type"},
		{"bad JSON", "POST", TracesPath, "application/json", "{", 400, "JSON"},
		{"trailing data", "POST", TracesPath, "application/json", "{} {}", 400, "after"},
		{"bad protobuf", "POST", TracesPath, "application/x-protobuf", "\xff\xff\xff", 400, "protobuf"},
		{"ID not hex", "POST", TracesPath, "application/json", strings.Replace(jsonExport, "5b8efff7", "zz8efff7", 1), 400, "not hex"},
		{"short span ID", "POST", TracesPath, "application/json", strings.Replace(jsonExport, `"eee19b7ec3c1b174"`, `"eee1"`, 1), 400, "span ID of 2"},
		{"short parent", "POST", TracesPath, "application/json", strings.Replace(jsonExport, `"parentSpanId":"eee19b7ec3c1b173"`, `"parentSpanId":"ee"`, 1), 400, "parent span ID"},
		{"name not a string", "POST", TracesPath, "application/json", strings.Replace(jsonExport, `"name":"process q"`, `"name":5`, 1), 400, "OTLP/JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New()
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", c.ctype)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != c.status || !strings.Contains(w.Body.String(), c.says) {
				t.Errorf("%d %q, want %d saying %q", w.Code, w.Body, c.status, c.says)
			}
			if len(r.Refused()) != 1 || len(r.Spans()) != 0 {
				t.Errorf("refused %v, spans %v", r.Refused(), r.Spans())
			}
		})
	}
}

// fakeT records a Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
}

// TestWaitTimesOut: Wait fails the test when no span matches in time.
func TestWaitTimesOut(t *testing.T) {
	r := New()
	ft := &fakeT{TB: t}
	start := time.Now()
	r.WaitName(ft, 50*time.Millisecond, "never")
	if ft.failed == "" || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("Wait returned after %s without failing", time.Since(start))
	}
}
