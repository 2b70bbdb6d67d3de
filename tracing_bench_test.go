package readpast_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/readpast/readpast"
)

// BenchmarkTracing runs one job per op through a Client, enqueue, claim,
// run and complete, with tracing off (no TracerProvider) and on (every
// span sampled and exported through a batch processor to an exporter that
// drops them): on a store in memory, which answers at once and so shows
// the client's own cost (ns/op and allocs/op are the client's), and on
// SQLite.
//
//	go test -run '^$' -bench Tracing -benchmem .
func BenchmarkTracing(b *testing.B) {
	for _, store := range []string{"memory", "sqlite"} {
		for _, mode := range []string{"off", "on"} {
			b.Run(store+"/"+mode, func(b *testing.B) {
				var s readpast.Store
				if store == "memory" {
					s = newBenchQueue()
				} else {
					s = newSQLiteStore(b)
				}
				var tp *sdktrace.TracerProvider
				if mode == "on" {
					tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(dropExporter{}))
					defer tp.Shutdown(context.Background())
				}
				benchTracing(b, s, tp)
			})
		}
	}
}

func benchTracing(b *testing.B, s readpast.Store, tp *sdktrace.TracerProvider) {
	ctx := context.Background()
	var ran atomic.Int64
	w := readpast.NewWorkers()
	w.Handle("noop", func(ctx context.Context, job *readpast.Job) (any, error) { ran.Add(1); return nil, nil }, nil)
	cfg := readpast.Config{Workers: w, RescueInterval: -1, ScheduleInterval: -1,
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 100}}}
	if tp != nil {
		cfg.TracerProvider = tp
	}
	c, err := readpast.NewClient(s, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	job := readpast.EnqueueParams{Kind: "noop", Payload: []byte(`{"n":1}`)}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := c.Enqueue(ctx, job); err != nil {
			b.Fatal(err)
		}
		n++
	}
	for ran.Load() < int64(n) {
		time.Sleep(100 * time.Microsecond)
	}
	if err := c.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTracingSDKSpan is the OpenTelemetry SDK's own cost of a span
// like an attempt's process span, with no readpast code around it: started
// with the four attributes a sampler is given, given the other four with
// its outcome in one call, ended, and exported through a batch processor
// to an exporter that drops it. It is the floor of what tracing on costs a
// job. "nine" adds messaging.client.id to the span (readpast gives it to
// the tracer's instrumentation scope instead): past eight attributes, the
// map the SDK deduplicates them with when the span ends outgrows its
// smallest form. "all-at-start" starts the span with all but the outcome
// and adds the outcome at the end, which costs more: the SDK copies the
// start's attributes twice and grows them again for the last.
//
//	go test -run '^$' -bench TracingSDKSpan -benchmem .
func BenchmarkTracingSDKSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(dropExporter{}))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("bench")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}) // a new root, as a queue's spans start from
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		semconv.MessagingSystemKey.String(readpast.MessagingSystem), semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"), semconv.MessagingDestinationName(readpast.DefaultQueue))}
	end := func(id int, more ...attribute.KeyValue) []attribute.KeyValue {
		return append(more, semconv.MessagingMessageID(strconv.Itoa(id)), attribute.Int("readpast.job.attempt", 1),
			attribute.String("readpast.job.kind", "noop"), attribute.String("readpast.job.outcome", "succeeded"))
	}
	buf := make([]attribute.KeyValue, 0, 8)
	for _, c := range []struct {
		name string
		more []attribute.KeyValue
	}{{"split", nil}, {"nine", []attribute.KeyValue{semconv.MessagingClientID("worker-1")}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			id := 0
			for b.Loop() {
				id++
				_, span := tracer.Start(ctx, "process default", start...)
				span.SetAttributes(end(id, append(buf[:0], c.more...)...)...)
				span.End()
			}
		})
	}
	b.Run("all-at-start", func(b *testing.B) {
		b.ReportAllocs()
		id := 0
		for b.Loop() {
			id++
			_, span := tracer.Start(ctx, "process default", append(start[:len(start):len(start)],
				trace.WithAttributes(semconv.MessagingMessageID(strconv.Itoa(id)), attribute.Int("readpast.job.attempt", 1),
					attribute.String("readpast.job.kind", "noop")))...)
			span.SetAttributes(attribute.String("readpast.job.outcome", "succeeded"))
			span.End()
		}
	})
}

// dropExporter exports spans nowhere.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }

// benchQueue is a store in memory that keeps what BenchmarkTracing needs:
// enqueue (validated as the stores do), claim, complete, and a wake-up on
// enqueue.
type benchQueue struct {
	readpast.Store
	wake chan struct{}

	mu      sync.Mutex
	pending []*readpast.Job // protected by mu
	nextID  int64           // protected by mu
}

func newBenchQueue() *benchQueue { return &benchQueue{wake: make(chan struct{}, 1)} }

func (q *benchQueue) Enqueue(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
	now := time.Now()
	out := make([]*readpast.Job, len(ps))
	q.mu.Lock()
	for i, p := range ps {
		p, err := p.Normalize(now)
		if err != nil {
			q.mu.Unlock()
			return nil, err
		}
		q.nextID++
		out[i] = &readpast.Job{ID: q.nextID, Queue: p.Queue, Kind: p.Kind, Payload: p.Payload, State: readpast.StatePending,
			MaxAttempts: p.MaxAttempts, RunAt: p.RunAt, CreatedAt: now, Traceparent: p.Traceparent, Tracestate: p.Tracestate}
		j := *out[i]
		q.pending = append(q.pending, &j)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return out, nil
}

func (q *benchQueue) Subscribe(ctx context.Context) (<-chan struct{}, error) { return q.wake, nil }

func (q *benchQueue) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(p.Limit, len(q.pending))
	jobs := q.pending[:k:k]
	q.pending = q.pending[k:]
	lease := now.Add(p.Lease)
	for i, j := range jobs {
		j.State, j.Attempt, j.StartedAt, j.LeaseExpiresAt, j.Worker = readpast.StateRunning, 1, &now, &lease, p.Worker
		j.Token = strconv.Itoa(i)
	}
	return jobs, nil
}

func (q *benchQueue) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	return make([]error, len(cs)), nil
}
