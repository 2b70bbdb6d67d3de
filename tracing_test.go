package readpast_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// newRecorder returns a tracer provider that samples every span and
// records them.
func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// ended returns the ended spans named name.
func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attrs returns a span's attributes by key, as strings.
func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// wantAttrs fails unless span s has every attribute of want.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q (all: %v)", s.Name(), k, got[k], v, got)
		}
	}
}

// traceparentOf is the W3C traceparent of sc, as the propagator writes it.
func traceparentOf(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c["traceparent"]
}

// TestTracingEnqueueToProcess: a job enqueued inside a span gets a "send"
// producer span, a child of it, whose context the job keeps; each attempt
// is a "process" consumer span, a child of (and linked to) that context,
// with the messaging attributes, in whose context the handler runs; a
// handler error is recorded on it, and a snooze is an outcome.
func TestTracingEnqueueToProcess(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		tp, rec := newRecorder(t)
		ctx := context.Background()
		var (
			mu     sync.Mutex
			inner  = map[string]trace.SpanContext{} // kind -> the handler's own span
			snooze = true
		)
		done := make(chan string, 10)
		w := readpast.NewWorkers()
		handler := func(ctx context.Context, job *readpast.Job) (any, error) {
			_, span := tp.Tracer("handler").Start(ctx, "handler "+job.Kind)
			span.End()
			mu.Lock()
			inner[job.Kind] = span.SpanContext()
			again := job.Kind == "sleepy" && snooze
			if again {
				snooze = false
			}
			mu.Unlock()
			defer func() { done <- job.Kind }()
			switch {
			case job.Kind == "bad":
				return nil, readpast.Permanent(errors.New("bad input"))
			case again:
				return nil, readpast.Snooze(time.Millisecond)
			}
			return nil, nil
		}
		for _, k := range []string{"ok", "bad", "sleepy"} {
			w.Handle(k, handler, nil)
		}
		c := startClient(t, s, readpast.Config{Workers: w, TracerProvider: tp, PollInterval: 20 * time.Millisecond, WorkerID: "worker-1"})

		caller, parent := tp.Tracer("app").Start(ctx, "caller")
		ok, err := c.Enqueue(caller, readpast.EnqueueParams{Kind: "ok", Queue: readpast.DefaultQueue})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(caller, readpast.EnqueueParams{Kind: "bad", MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		sleepy, err := c.Enqueue(caller, readpast.EnqueueParams{Kind: "sleepy"})
		if err != nil {
			t.Fatal(err)
		}
		parent.End()
		for range 4 { // ok, bad, sleepy twice
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("handlers did not run")
			}
		}
		waitFor(t, 10*time.Second, "the process spans", func() bool { return len(ended(rec, "process default")) == 4 })

		sends := ended(rec, "send default")
		if len(sends) != 3 {
			t.Fatalf("%d send spans, want 3", len(sends))
		}
		send := sends[0]
		if send.SpanKind() != trace.SpanKindProducer || send.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("send span: kind %v, parent %v; want producer, child of the caller's span", send.SpanKind(), send.Parent().SpanID())
		}
		wantAttrs(t, send, map[string]string{
			"messaging.system": "readpast", "messaging.operation.type": "send", "messaging.operation.name": "send",
			"messaging.destination.name": "default", "messaging.message.id": fmt.Sprint(ok[0].ID), "readpast.job.kind": "ok",
		})
		if _, has := attrs(send)["messaging.batch.message_count"]; has {
			t.Error("a single-job send has messaging.batch.message_count")
		}
		if want := traceparentOf(send.SpanContext()); ok[0].Traceparent != want {
			t.Errorf("enqueued job's traceparent = %q, want the send span's %q", ok[0].Traceparent, want)
		}

		byKind := map[string][]sdktrace.ReadOnlySpan{}
		for _, p := range ended(rec, "process default") {
			byKind[attrs(p)["readpast.job.kind"]] = append(byKind[attrs(p)["readpast.job.kind"]], p)
		}
		p := byKind["ok"][0]
		if p.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("process span kind %v, want consumer", p.SpanKind())
		}
		if p.Parent().SpanID() != send.SpanContext().SpanID() || p.SpanContext().TraceID() != send.SpanContext().TraceID() || !p.Parent().IsRemote() {
			t.Errorf("process span's parent %v (trace %v), want the send span %v", p.Parent().SpanID(), p.SpanContext().TraceID(), send.SpanContext().SpanID())
		}
		if l := p.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
			t.Errorf("process span's links %v, want one to the send span", l)
		}
		wantAttrs(t, p, map[string]string{
			"messaging.system": "readpast", "messaging.operation.type": "process", "messaging.operation.name": "process",
			"messaging.destination.name": "default", "messaging.message.id": fmt.Sprint(ok[0].ID),
			"readpast.job.attempt": "1", "readpast.job.kind": "ok", "readpast.job.outcome": "succeeded",
		})
		if got := attrs(p)["messaging.client.id"]; got != "" {
			t.Errorf("process span has messaging.client.id %q; it belongs to the client's instrumentation scope", got)
		}
		for _, sp := range []sdktrace.ReadOnlySpan{p, send} {
			if scope := sp.InstrumentationScope().Attributes; scope.Len() != 1 || !scope.HasValue("messaging.client.id") {
				t.Errorf("%s span's scope %v, want only messaging.client.id", sp.Name(), scope)
			} else if id, _ := scope.Value("messaging.client.id"); id.AsString() != "worker-1" {
				t.Errorf("%s span's scope %v, want messaging.client.id worker-1", sp.Name(), sp.InstrumentationScope())
			}
		}
		if got := len(p.Attributes()); got > 8 {
			t.Errorf("a succeeded attempt's span has %d attributes (%v); past 8 the SDK's deduplication of every span costs a map of its own", got, attrs(p))
		}
		if p.Status().Code == codes.Error {
			t.Errorf("succeeded attempt has status %v", p.Status())
		}
		mu.Lock()
		if got := inner["ok"]; got.TraceID() != p.SpanContext().TraceID() {
			t.Errorf("the handler's span is in trace %v, want the process span's %v", got.TraceID(), p.SpanContext().TraceID())
		}
		mu.Unlock()
		for _, h := range ended(rec, "handler ok") {
			if h.Parent().SpanID() != p.SpanContext().SpanID() {
				t.Errorf("handler span's parent %v, want the process span %v", h.Parent().SpanID(), p.SpanContext().SpanID())
			}
		}

		bad := byKind["bad"][0]
		if bad.Status().Code != codes.Error || !strings.Contains(bad.Status().Description, "bad input") {
			t.Errorf("failed attempt's status %v, want Error with the handler's error", bad.Status())
		}
		if ev := bad.Events(); len(ev) == 0 || ev[0].Name != "exception" {
			t.Errorf("failed attempt's events %v, want the recorded error", ev)
		}
		wantAttrs(t, bad, map[string]string{"readpast.job.outcome": "discarded"})
		if attrs(bad)["error.type"] == "" {
			t.Error("failed attempt has no error.type")
		}

		sl := byKind["sleepy"]
		if len(sl) != 2 {
			t.Fatalf("%d process spans of the snoozed job, want 2", len(sl))
		}
		outcomes := map[string]bool{}
		for _, s := range sl {
			outcomes[attrs(s)["readpast.job.outcome"]] = true
			if s.Parent().SpanID() != traceparentSpanID(t, sleepy[0].Traceparent) {
				t.Errorf("attempt of the snoozed job: parent %v, want its creation context %s", s.Parent().SpanID(), sleepy[0].Traceparent)
			}
			if a := attrs(s); a["readpast.job.outcome"] == "snoozed" && a["readpast.job.snooze_delay_seconds"] != "0.001" {
				t.Errorf("snoozed attempt: delay %q, want 0.001", a["readpast.job.snooze_delay_seconds"])
			}
		}
		if !outcomes["snoozed"] || !outcomes["succeeded"] {
			t.Errorf("outcomes of the snoozed job's attempts %v, want snoozed then succeeded", outcomes)
		}
	})
}

// traceparentSpanID is the parent-id field of a traceparent.
func traceparentSpanID(t *testing.T, tp string) trace.SpanID {
	t.Helper()
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		t.Fatalf("%q is not a traceparent", tp)
	}
	return sc.SpanID()
}

// TestTracingBatch: a batch gets a create span per job, whose context
// that job keeps, and one send span (kind client) linked to them; a job
// that comes with a creation context keeps it and gets no create span.
// Claims return each job's context, in both stores, through the COPY path
// of PostgreSQL too.
func TestTracingBatch(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		for _, n := range []int{3, 600} { // 600: PostgreSQL writes it with COPY
			tp, rec := newRecorder(t)
			c, err := readpast.NewClient(s, readpast.Config{TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := tp.Tracer("app").Start(context.Background(), "caller")
			custom := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			ps := make([]readpast.EnqueueParams, n)
			for i := range ps {
				ps[i] = readpast.EnqueueParams{Kind: "k", Queue: "batch"}
			}
			ps[1].Traceparent, ps[1].Tracestate = custom, "vendor=1"
			jobs, err := c.Enqueue(ctx, ps...)
			if err != nil {
				t.Fatal(err)
			}
			parent.End()
			if ps[0].Traceparent != "" {
				t.Fatal("Enqueue changed the caller's params")
			}
			sends, creates := ended(rec, "send batch"), ended(rec, "create batch")
			if len(sends) != 1 || len(creates) != n-1 {
				t.Fatalf("%d send and %d create spans, want 1 and %d", len(sends), len(creates), n-1)
			}
			send := sends[0]
			if send.SpanKind() != trace.SpanKindClient || send.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("send span: kind %v, parent %v; want client, child of the caller", send.SpanKind(), send.Parent())
			}
			wantAttrs(t, send, map[string]string{"messaging.operation.type": "send", "messaging.batch.message_count": fmt.Sprint(n),
				"messaging.destination.name": "batch"})
			byID := map[string]sdktrace.ReadOnlySpan{}
			for _, cs := range creates {
				if cs.SpanKind() != trace.SpanKindProducer {
					t.Errorf("create span kind %v, want producer", cs.SpanKind())
				}
				wantAttrs(t, cs, map[string]string{"messaging.operation.type": "create", "messaging.destination.name": "batch"})
				byID[attrs(cs)["messaging.message.id"]] = cs
			}
			if links := send.Links(); n <= 128 && len(links) != n {
				t.Errorf("send span has %d links, want %d", len(links), n)
			}
			if jobs[1].Traceparent != custom || jobs[1].Tracestate != "vendor=1" {
				t.Errorf("job with its own context came back with %q %q", jobs[1].Traceparent, jobs[1].Tracestate)
			}
			for i, j := range jobs {
				if i == 1 {
					continue
				}
				cs := byID[fmt.Sprint(j.ID)]
				if cs == nil {
					t.Fatalf("no create span for job %d", j.ID)
				}
				if j.Traceparent != traceparentOf(cs.SpanContext()) {
					t.Fatalf("job %d: traceparent %q, want its create span's", j.ID, j.Traceparent)
				}
			}
			claimed, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{"batch"}, Worker: "w", Limit: n, Lease: time.Minute})
			if err != nil || len(claimed) != n {
				t.Fatalf("claimed %d of %d: %v", len(claimed), n, err)
			}
			want := map[int64]readpast.Job{}
			for _, j := range jobs {
				want[j.ID] = *j
			}
			for _, j := range claimed {
				if w := want[j.ID]; j.Traceparent != w.Traceparent || j.Tracestate != w.Tracestate {
					t.Fatalf("claimed job %d: %q %q, want %q %q", j.ID, j.Traceparent, j.Tracestate, w.Traceparent, w.Tracestate)
				}
			}
		}
	})
}

// TestTracingTxEnqueue: jobs enqueued inside the caller's transaction get
// a send span and keep its context, which a claim returns once the
// transaction commits: database/sql transactions (EnqueueSQLTx, SQLite),
// and pgx ones through EnqueueWith (PostgreSQL).
func TestTracingTxEnqueue(t *testing.T) {
	eachStore(t, func(t *testing.T, s readpast.Store) {
		tp, rec := newRecorder(t)
		c, err := readpast.NewClient(s, readpast.Config{TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var jobs []*readpast.Job
		var commit func() error
		switch st := s.(type) {
		case *sqlite.Store:
			tx, err := st.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			jobs, err = c.EnqueueSQLTx(ctx, tx, readpast.EnqueueParams{Kind: "k", Queue: "tx", UniqueKey: "once"})
			if err != nil {
				t.Fatal(err)
			}
			commit = tx.Commit
		case *postgres.Store:
			tx, err := st.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			jobs, err = c.EnqueueWith(ctx, func(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
				return st.EnqueueTx(ctx, tx, ps)
			}, readpast.EnqueueParams{Kind: "k", Queue: "tx", UniqueKey: "once"})
			if err != nil {
				t.Fatal(err)
			}
			commit = func() error { return tx.Commit(ctx) }
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		sends := ended(rec, "send tx")
		if len(sends) != 1 || sends[0].SpanKind() != trace.SpanKindProducer {
			t.Fatalf("send spans %v, want one producer span", sends)
		}
		want := traceparentOf(sends[0].SpanContext())
		if jobs[0].Traceparent != want {
			t.Errorf("enqueued in a transaction: traceparent %q, want %q", jobs[0].Traceparent, want)
		}
		claimed, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"tx"}, Worker: "w", Limit: 1, Lease: time.Minute})
		if err != nil || len(claimed) != 1 {
			t.Fatal(claimed, err)
		}
		if claimed[0].Traceparent != want {
			t.Errorf("claimed: traceparent %q, want %q", claimed[0].Traceparent, want)
		}
	})
}

// TestTracingUntracedJobIsRoot: a job enqueued outside any trace gets a
// process span of its own trace: a root, without links.
func TestTracingUntracedJobIsRoot(t *testing.T) {
	s := newSQLiteStore(t)
	tp, rec := newRecorder(t)
	ctx := context.Background()
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
	if err != nil || jobs[0].Traceparent != "" {
		t.Fatal(jobs, err)
	}
	ran := make(chan struct{}, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) { ran <- struct{}{}; return nil, nil }, nil)
	// The client's start context carries a span: the process span must
	// not become its child.
	startCtx, span := tp.Tracer("app").Start(ctx, "start")
	c, err := readpast.NewClient(s, readpast.Config{Workers: w, TracerProvider: tp, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	span.End()
	defer c.Stop(ctx)
	<-ran
	waitFor(t, 5*time.Second, "the process span", func() bool { return len(ended(rec, "process default")) == 1 })
	p := ended(rec, "process default")[0]
	if p.Parent().IsValid() || len(p.Links()) != 0 {
		t.Errorf("untraced job's process span: parent %v, links %v; want a root without links", p.Parent(), p.Links())
	}
}

// TestTracingBadTraceContext: a malformed creation context is refused
// with an error naming the field, and nothing is enqueued.
func TestTracingBadTraceContext(t *testing.T) {
	s := newSQLiteStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		p     readpast.EnqueueParams
		field string
	}{
		{readpast.EnqueueParams{Kind: "k", Traceparent: "not-a-traceparent"}, "traceparent"},
		{readpast.EnqueueParams{Kind: "k", Traceparent: "00-00000000000000000000000000000000-b7ad6b7169203331-01"}, "traceparent"},
		{readpast.EnqueueParams{Kind: "k", Tracestate: "a=b"}, "tracestate"},
		{readpast.EnqueueParams{Kind: "k", Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "not a tracestate"}, "tracestate"},
		{readpast.EnqueueParams{Kind: "k", Traceparent: strings.Repeat("0", readpast.MaxTraceparentLen+1)}, "traceparent"},
		{readpast.EnqueueParams{Kind: "k", Traceparent: "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"}, "traceparent"}, // W3C: lower case only
	} {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{tc.p})
		var fe *readpast.FieldError
		if !errors.Is(err, readpast.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: got %v, want an invalid %s", tc.p, err, tc.field)
		}
	}
	// A client that traces refuses them too, rather than replace them
	// with its span's context.
	tp, _ := newRecorder(t)
	c, err := readpast.NewClient(s, readpast.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range [][]readpast.EnqueueParams{
		{{Kind: "k", Traceparent: "not-a-traceparent"}},
		{{Kind: "k"}, {Kind: "k", Tracestate: "a=b"}},
	} {
		if _, err := c.Enqueue(ctx, ps...); !errors.Is(err, readpast.ErrInvalid) {
			t.Errorf("traced enqueue of %+v: %v, want ErrInvalid", ps, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || len(st) != 0 {
		t.Fatalf("after refused enqueues: %v %v", st, err)
	}
}

// TestTracingOffStoresNothing: without a TracerProvider nothing is traced
// and jobs carry no creation context, even when ctx has a span.
func TestTracingOffStoresNothing(t *testing.T) {
	s := newSQLiteStore(t)
	tp, rec := newRecorder(t)
	c, err := readpast.NewClient(s, readpast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tp.Tracer("app").Start(context.Background(), "caller")
	defer span.End()
	jobs, err := c.Enqueue(ctx, readpast.EnqueueParams{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Traceparent != "" || len(rec.Ended()) != 0 {
		t.Fatalf("tracing off: job traceparent %q, %d spans", jobs[0].Traceparent, len(rec.Ended()))
	}
	if tr, err := readpast.NewTracing(nil, nil); tr != nil || err != nil {
		t.Fatalf("NewTracing(nil, nil) = %v, %v; want nil", tr, err)
	}
}

// TestTracingMetrics: with a MeterProvider (and no TracerProvider) the
// client counts the jobs it sends (messaging.client.sent.messages) and
// measures each attempt (messaging.process.duration), per queue.
func TestTracingMetrics(t *testing.T) {
	s := newSQLiteStore(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	ran := make(chan struct{}, 3)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) { ran <- struct{}{}; return nil, nil }, nil)
	c := startClient(t, s, readpast.Config{Workers: w, MeterProvider: mp, Queues: map[string]readpast.QueueConfig{"m": {}}, PollInterval: 20 * time.Millisecond})
	jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "k", Queue: "m"}, readpast.EnqueueParams{Kind: "k", Queue: "m"})
	if err != nil || jobs[0].Traceparent != "" {
		t.Fatal(jobs, err)
	}
	<-ran
	<-ran
	var got map[string]int64
	waitFor(t, 5*time.Second, "both measurements", func() bool {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got = map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						if q, _ := p.Attributes.Value("messaging.destination.name"); q.AsString() == "m" {
							got[m.Name] += p.Value
						}
					}
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						if q, _ := p.Attributes.Value("messaging.destination.name"); q.AsString() == "m" {
							got[m.Name] += int64(p.Count)
						}
					}
				}
			}
		}
		return got["messaging.process.duration"] == 2
	})
	if got["messaging.client.sent.messages"] != 2 {
		t.Errorf("metrics %v, want 2 jobs sent and 2 attempts measured", got)
	}
}
