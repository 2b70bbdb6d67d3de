// Package otlptest is an OpenTelemetry trace receiver for tests: an
// OTLP/HTTP endpoint (POST /v1/traces) that accepts export requests in
// both encodings the protocol defines, binary protobuf
// (application/x-protobuf) and JSON (application/json, with the trace and
// span IDs in hex as OTLP/JSON has them), gzip-compressed or not, and
// keeps every span it receives with its resource's service.name.
//
// Point an exporter at Receiver.URL (OTEL_EXPORTER_OTLP_ENDPOINT) or at
// TracesURL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), then read Spans or
// Wait for the spans the test expects.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// TracesPath is the path OTLP/HTTP exporters post traces to.
const TracesPath = "/v1/traces"

// MaxBodyBytes bounds an export request's body, before and after gzip.
const MaxBodyBytes = 32 << 20

// The encodings of an export request (Span.Encoding).
const (
	Protobuf = "protobuf"
	JSON     = "json"
)

// Span is one span received, its IDs in lower-case hex.
type Span struct {
	Service      string // the resource's service.name ("" without one)
	Scope        string // the instrumentation scope's name
	TraceID      string // 32 hex digits
	SpanID       string // 16 hex digits
	ParentSpanID string // 16 hex digits; empty for a root span
	Name         string
	Kind         tracepb.Span_SpanKind
	// Attributes by key: string, bool, int64, float64, []byte, []any or
	// map[string]any values.
	Attributes    map[string]any
	Links         []Link
	StatusCode    tracepb.Status_StatusCode
	StatusMessage string
	Encoding      string // Protobuf or JSON: how the span arrived
}

// Link is a span's link to another span.
type Link struct {
	TraceID    string
	SpanID     string
	Attributes map[string]any
}

// String names the span, its service and IDs, for test messages.
func (s Span) String() string {
	return fmt.Sprintf("%q (%s, service %q) trace %s span %s parent %q, %d links",
		s.Name, strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_"), s.Service, s.TraceID, s.SpanID, s.ParentSpanID, len(s.Links))
}

// Receiver keeps the spans of the export requests it serves. It is an
// http.Handler; Start serves it on a loopback port. Its zero value is
// not ready: use New or Start.
type Receiver struct {
	// URL is the base URL of the receiver Start serves, as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes it ("" for one from New).
	URL string

	mu      sync.Mutex
	spans   []Span
	refused []error
	added   chan struct{} // closed, and replaced, when spans are added
}

// New returns a Receiver that serves no port: call its ServeHTTP.
func New() *Receiver {
	return &Receiver{added: make(chan struct{})}
}

// Start serves a new Receiver on a free port of 127.0.0.1 until the end
// of the test, and then fails t if it refused a request (one that was not
// a valid OTLP trace export).
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := New()
	srv := httptest.NewServer(r)
	r.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		for _, err := range r.Refused() {
			t.Errorf("OTLP receiver refused a request: %v", err)
		}
	})
	return r
}

// TracesURL is the URL exporters post traces to, as
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT takes it.
func (r *Receiver) TracesURL() string { return r.URL + TracesPath }

// Spans returns the spans received so far, in the order they arrived.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Refused returns why each request the receiver refused was refused.
func (r *Receiver) Refused() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.refused...)
}

// Wait returns the first span received that match accepts, waiting up to
// timeout for it; past that it fails t, naming what it waited for and
// listing the spans it has.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, match func(Span) bool) Span {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		added := r.added
		for _, s := range r.spans {
			if match(s) {
				r.mu.Unlock()
				return s
			}
		}
		r.mu.Unlock()
		select {
		case <-added:
		case <-deadline.C:
			t.Fatalf("OTLP receiver: no span %s within %s; received:\n%s", what, timeout, r.describe())
			return Span{}
		}
	}
}

// WaitName is Wait for the first span named name.
func (r *Receiver) WaitName(t testing.TB, timeout time.Duration, name string) Span {
	t.Helper()
	return r.Wait(t, timeout, fmt.Sprintf("named %q", name), func(s Span) bool { return s.Name == name })
}

// describe lists the spans received and the requests refused.
func (r *Receiver) describe() string {
	var b strings.Builder
	for _, s := range r.Spans() {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	for _, err := range r.Refused() {
		fmt.Fprintf(&b, "  refused: %v\n", err)
	}
	if b.Len() == 0 {
		return "  nothing\n"
	}
	return b.String()
}

// ServeHTTP takes one OTLP/HTTP trace export: POST /v1/traces with a
// protobuf or JSON body. It answers as the protocol says, in the
// request's encoding; a request it cannot decode gets 400 (415 for
// another content type) and is kept in Refused.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != TracesPath {
		r.refuse(w, http.StatusNotFound, fmt.Errorf("%s %s: not %s", req.Method, req.URL.Path, TracesPath))
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.refuse(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: not a POST", req.Method, req.URL.Path))
		return
	}
	ct, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (ct != "application/x-protobuf" && ct != "application/json") {
		r.refuse(w, http.StatusUnsupportedMediaType,
			fmt.Errorf("Content-Type %q: want application/x-protobuf or application/json", req.Header.Get("Content-Type")))
		return
	}
	raw, err := readBody(w, req)
	if err != nil {
		r.refuse(w, http.StatusBadRequest, err)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	encoding := Protobuf
	if ct == "application/json" {
		encoding = JSON
		err = unmarshalJSON(raw, &msg)
	} else {
		err = proto.Unmarshal(raw, &msg)
	}
	if err != nil {
		r.refuse(w, http.StatusBadRequest, fmt.Errorf("%s export request: %w", encoding, err))
		return
	}
	spans, err := flatten(&msg, encoding)
	if err != nil {
		r.refuse(w, http.StatusBadRequest, fmt.Errorf("%s export request: %w", encoding, err))
		return
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	close(r.added)
	r.added = make(chan struct{})
	r.mu.Unlock()
	resp := &coltracepb.ExportTraceServiceResponse{}
	var out []byte
	if encoding == JSON {
		out, err = protojson.Marshal(resp)
	} else {
		out, err = proto.Marshal(resp)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(out)
}

// refuse answers status with err's text and keeps err.
func (r *Receiver) refuse(w http.ResponseWriter, status int, err error) {
	r.mu.Lock()
	r.refused = append(r.refused, err)
	r.mu.Unlock()
	http.Error(w, err.Error(), status)
}

// readBody reads the request's body, gunzipped if it says it is gzip, at
// most MaxBodyBytes either way.
func readBody(w http.ResponseWriter, req *http.Request) ([]byte, error) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, MaxBodyBytes)
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		body = zr
	default:
		return nil, fmt.Errorf("Content-Encoding %q: want gzip or none", enc)
	}
	raw, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if len(raw) > MaxBodyBytes {
		return nil, fmt.Errorf("body over %d bytes", MaxBodyBytes)
	}
	return raw, nil
}

// idKeys are the OTLP/JSON fields whose values are IDs in hex (where the
// protobuf JSON mapping has base64).
var idKeys = map[string]bool{
	"traceId": true, "spanId": true, "parentSpanId": true,
	"trace_id": true, "span_id": true, "parent_span_id": true,
}

// unmarshalJSON decodes an OTLP/JSON export request: the protobuf JSON
// mapping, except that trace and span IDs are hex strings. Unknown fields
// are ignored, as OTLP/JSON receivers must.
func unmarshalJSON(raw []byte, msg *coltracepb.ExportTraceServiceRequest) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	if dec.More() {
		return errors.New("JSON: data after the object")
	}
	if err := hexToBase64(doc); err != nil {
		return err
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(canon, msg); err != nil {
		return fmt.Errorf("OTLP/JSON: %w", err)
	}
	return nil
}

// hexToBase64 rewrites, in place, the hex IDs of an OTLP/JSON document in
// base64, as protojson reads bytes.
func hexToBase64(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && idKeys[k] {
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not hex", k, s)
				}
				v[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := hexToBase64(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := hexToBase64(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// flatten lists the request's spans, each with its resource's service.name
// and its scope's name; IDs of the wrong length are an error.
func flatten(msg *coltracepb.ExportTraceServiceRequest, encoding string) ([]Span, error) {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if err := checkIDs(s); err != nil {
					return nil, fmt.Errorf("span %q: %w", s.GetName(), err)
				}
				span := Span{
					Service:       service,
					Scope:         ss.GetScope().GetName(),
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Name:          s.GetName(),
					Kind:          s.GetKind(),
					Attributes:    attributes(s.GetAttributes()),
					StatusCode:    s.GetStatus().GetCode(),
					StatusMessage: s.GetStatus().GetMessage(),
					Encoding:      encoding,
				}
				for _, l := range s.GetLinks() {
					span.Links = append(span.Links, Link{
						TraceID:    hex.EncodeToString(l.GetTraceId()),
						SpanID:     hex.EncodeToString(l.GetSpanId()),
						Attributes: attributes(l.GetAttributes()),
					})
				}
				out = append(out, span)
			}
		}
	}
	return out, nil
}

// checkIDs refuses a span whose IDs are not of the sizes OTLP says: a
// 16-byte trace ID, 8-byte span ID, parent span ID empty or 8 bytes, and
// the same for each link.
func checkIDs(s *tracepb.Span) error {
	if len(s.GetTraceId()) != 16 || len(s.GetSpanId()) != 8 {
		return fmt.Errorf("trace ID of %d bytes, span ID of %d: want 16 and 8", len(s.GetTraceId()), len(s.GetSpanId()))
	}
	if n := len(s.GetParentSpanId()); n != 0 && n != 8 {
		return fmt.Errorf("parent span ID of %d bytes: want 8 or none", n)
	}
	for _, l := range s.GetLinks() {
		if len(l.GetTraceId()) != 16 || len(l.GetSpanId()) != 8 {
			return fmt.Errorf("link with a trace ID of %d bytes, span ID of %d: want 16 and 8", len(l.GetTraceId()), len(l.GetSpanId()))
		}
	}
	return nil
}

// attributes is kvs by key, their values as Go values.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

// value is an OTLP AnyValue as a Go value (nil when it has none).
func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		return attributes(x.KvlistValue.GetValues())
	}
	return nil
}
