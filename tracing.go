package readpast

import (
	"cmp"
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names readpast's tracer and meter.
const InstrumentationName = "github.com/readpast/readpast"

// MessagingSystem is readpast's value of the messaging.system attribute.
const MessagingSystem = "readpast"

// Limits of a job's creation context (EnqueueParams.Traceparent and
// Tracestate), in bytes. A traceparent of today's version 00 is 55 bytes;
// the W3C lets later versions append fields. 512 bytes is the tracestate
// every W3C implementation must pass on.
const (
	MaxTraceparentLen = 256
	MaxTracestateLen  = 512
)

// Attributes of readpast's own on its spans (docs/design/tracing.md).
const (
	attrJobKind      = attribute.Key("readpast.job.kind")
	attrJobAttempt   = attribute.Key("readpast.job.attempt")
	attrJobOutcome   = attribute.Key("readpast.job.outcome")
	attrJobGroup     = attribute.Key("readpast.job.group")
	attrJobDuplicate = attribute.Key("readpast.job.duplicate")
	attrSnoozeDelay  = attribute.Key("readpast.job.snooze_delay_seconds")
)

// The outcomes of an attempt (readpast.job.outcome on its process span).
const (
	outcomeSucceeded = "succeeded" // handed to the completer
	outcomeRetrying  = "retrying"  // failed, to run again at its retry time
	outcomeFailed    = "failed"    // failed, its attempts used up
	outcomeDiscarded = "discarded" // failed for good (Permanent), attempts left or not
	outcomeSnoozed   = "snoozed"   // back to pending, the attempt not counted
	outcomeReleased  = "released"  // given back unworked: the client stopped
	outcomeLeaseLost = "lease_lost"
)

// Operation names (messaging.operation.name) and span name prefixes.
const (
	opSend    = "send"
	opCreate  = "create"
	opProcess = "process"
)

var systemAttr = semconv.MessagingSystemKey.String(MessagingSystem)

// Tracing makes the spans and measurements of enqueues and attempts, as
// the OpenTelemetry messaging semantic conventions (semconv v1.43.0) say:
// a producer span per enqueue ("send <queue>"; per job "create <queue>"
// spans in a batch) whose context each job keeps as its creation context
// (Job.Traceparent, Tracestate), and a consumer span per attempt
// ("process <queue>") that continues it. A nil *Tracing does nothing and
// costs nothing. Config.TracerProvider and MeterProvider give a Client
// its own; the HTTP API takes one too (httpapi.WithTracing).
type Tracing struct {
	tracer  trace.Tracer // nil: no spans
	metered bool
	sent    messagingconv.ClientSentMessages
	process messagingconv.ProcessDuration
}

// NewTracing returns the Tracing of tp (spans) and mp (metrics:
// messaging.client.sent.messages and messaging.process.duration), either
// of which may be nil; nil for both.
func NewTracing(tp trace.TracerProvider, mp metric.MeterProvider) (*Tracing, error) {
	return newTracing(tp, mp, "")
}

// newTracing is NewTracing for a client: a clientID other than "" is
// given to the instrumentation scope of its tracer as
// messaging.client.id, once for every span the client makes rather than
// once a span (docs/design/tracing.md, "Process spans").
func newTracing(tp trace.TracerProvider, mp metric.MeterProvider, clientID string) (*Tracing, error) {
	if tp == nil && mp == nil {
		return nil, nil
	}
	t := &Tracing{}
	if tp != nil {
		opts := []trace.TracerOption{trace.WithSchemaURL(semconv.SchemaURL)}
		if clientID != "" {
			opts = append(opts, trace.WithInstrumentationAttributes(semconv.MessagingClientID(clientID)))
		}
		t.tracer = tp.Tracer(InstrumentationName, opts...)
	}
	if mp != nil {
		m := mp.Meter(InstrumentationName, metric.WithSchemaURL(semconv.SchemaURL))
		var err error
		if t.sent, err = messagingconv.NewClientSentMessages(m); err != nil {
			return nil, err
		}
		if t.process, err = messagingconv.NewProcessDuration(m); err != nil {
			return nil, err
		}
		t.metered = true
	}
	return t, nil
}

// InsertFunc inserts jobs, all or none, as Store.Enqueue does: a store's
// Enqueue, or a closure over one of its transactional variants
// (SQLTxStore.EnqueueSQLTx, postgres.Store.EnqueueTx).
type InsertFunc func(ctx context.Context, jobs []EnqueueParams) ([]*Job, error)

// Enqueue inserts jobs through insert inside a producer span, a child of
// ctx's span. A single job gets a "send <queue>" span (kind producer)
// whose context becomes the job's creation context. A batch gets a
// "create <queue>" span (kind producer) per job, whose context becomes
// that job's, and one "send" span (kind client, named after the queue
// when all jobs share one) linked to them. A job that comes with a
// creation context of its own (EnqueueParams.Traceparent) keeps it, gets
// no create span, and the send span links to it. jobs is not modified.
func (t *Tracing) Enqueue(ctx context.Context, jobs []EnqueueParams, insert InsertFunc) ([]*Job, error) {
	if t == nil || len(jobs) == 0 {
		return insert(ctx, jobs)
	}
	if t.tracer == nil {
		out, err := insert(ctx, jobs)
		t.countSent(ctx, jobs, err)
		return out, err
	}
	jobs = append([]EnqueueParams(nil), jobs...)
	name, queue := opSend, cmp.Or(jobs[0].Queue, DefaultQueue)
	one := true
	for _, p := range jobs[1:] {
		if cmp.Or(p.Queue, DefaultQueue) != queue {
			one = false
			break
		}
	}
	attrs := []attribute.KeyValue{systemAttr, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName(opSend)}
	if one {
		name += " " + queue
		attrs = append(attrs, semconv.MessagingDestinationName(queue))
	}
	var (
		links   []trace.Link
		creates []trace.Span
		kind    = trace.SpanKindClient
	)
	if len(jobs) == 1 {
		p := jobs[0]
		attrs = append(attrs, attrJobKind.String(p.Kind))
		if hasOwnContext(p) {
			links = t.linkTo(links, p)
		} else {
			kind = trace.SpanKindProducer // its context is the creation context
		}
	} else {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(len(jobs)))
		creates = make([]trace.Span, len(jobs))
		for i := range jobs {
			p := &jobs[i]
			if hasOwnContext(*p) {
				links = t.linkTo(links, *p)
				continue
			}
			q := cmp.Or(p.Queue, DefaultQueue)
			_, span := t.tracer.Start(ctx, opCreate+" "+q, trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeCreate, semconv.MessagingOperationName(opCreate),
					semconv.MessagingDestinationName(q), attrJobKind.String(p.Kind)))
			creates[i] = span
			p.Traceparent, p.Tracestate = injectTraceContext(span.SpanContext())
			links = append(links, trace.Link{SpanContext: span.SpanContext()})
		}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...), trace.WithLinks(links...))
	defer span.End()
	if kind == trace.SpanKindProducer {
		jobs[0].Traceparent, jobs[0].Tracestate = injectTraceContext(span.SpanContext())
	}
	out, err := insert(ctx, jobs)
	t.countSent(ctx, jobs, err)
	if err != nil {
		failSpan(span, err)
	}
	if len(jobs) == 1 && len(out) == 1 {
		span.SetAttributes(semconv.MessagingMessageID(itoa(out[0].ID)))
		if out[0].Duplicate {
			span.SetAttributes(attrJobDuplicate.Bool(true))
		}
	}
	for i, cs := range creates {
		if cs == nil {
			continue
		}
		if err != nil {
			failSpan(cs, err)
		} else if i < len(out) {
			cs.SetAttributes(semconv.MessagingMessageID(itoa(out[i].ID)))
			if out[i].Duplicate {
				cs.SetAttributes(attrJobDuplicate.Bool(true))
			}
		}
		cs.End()
	}
	return out, err
}

// hasOwnContext reports whether p comes with a creation context of the
// caller's, which the enqueue keeps as it is (a malformed one is left for
// the store to refuse).
func hasOwnContext(p EnqueueParams) bool { return p.Traceparent != "" || p.Tracestate != "" }

// linkTo adds to links one to p's own creation context, if valid.
func (t *Tracing) linkTo(links []trace.Link, p EnqueueParams) []trace.Link {
	if sc := t.extract(p.Traceparent, p.Tracestate); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
}

// countSent adds the jobs of an enqueue to messaging.client.sent.messages.
func (t *Tracing) countSent(ctx context.Context, jobs []EnqueueParams, err error) {
	if !t.metered {
		return
	}
	perQueue := map[string]int64{}
	for _, p := range jobs {
		perQueue[cmp.Or(p.Queue, DefaultQueue)]++
	}
	for q, n := range perQueue {
		if err != nil {
			t.sent.Add(ctx, n, opSend, MessagingSystem, t.sent.AttrDestinationName(q), semconv.ErrorType(err))
		} else {
			t.sent.Add(ctx, n, opSend, MessagingSystem, t.sent.AttrDestinationName(q))
		}
	}
}

// extract returns the span context of a traceparent and tracestate,
// invalid when traceparent is empty or not one.
func (t *Tracing) extract(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return extractTraceContext(traceparent, tracestate)
}

// extractTraceContext reads a traceparent and tracestate as the W3C
// propagator does. A canonical traceparent of version 00, which is what
// every stored job holds (Normalize writes that form), is read by
// parseTraceparent without the context and carrier the propagator's API
// needs (6 allocations an attempt); anything else goes to the propagator.
func extractTraceContext(traceparent, tracestate string) trace.SpanContext {
	if sc, ok := parseTraceparent(traceparent, tracestate); ok {
		return sc
	}
	carrier := &traceCarrier{traceparent: traceparent, tracestate: tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// traceparentLen is the length of a traceparent of version 00.
const traceparentLen = 55

// parseTraceparent reads a traceparent of version 00 in its canonical
// form ("00-" trace id "-" parent id "-" flags, lower-case hex, valid
// ids, no reserved flags) and the tracestate beside it, giving the span
// context the W3C propagator would (remote, flags sampled and random
// only, a tracestate that does not parse dropped); ok is false for any
// other traceparent, which the caller leaves to the propagator.
func parseTraceparent(traceparent, tracestate string) (sc trace.SpanContext, ok bool) {
	tp := traceparent
	if len(tp) != traceparentLen || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return sc, false
	}
	tid, err := trace.TraceIDFromHex(tp[3:35]) // lower-case hex, not all zero
	if err != nil {
		return sc, false
	}
	sid, err := trace.SpanIDFromHex(tp[36:52])
	if err != nil {
		return sc, false
	}
	if tp[53] != '0' || tp[54] < '0' || tp[54] > '3' { // 00 to 03: no reserved bits
		return sc, false
	}
	cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(tp[54] - '0'), Remote: true}
	if tracestate != "" {
		cfg.TraceState, _ = trace.ParseTraceState(tracestate) // as the propagator: ignored if bad
	}
	return trace.NewSpanContext(cfg), true
}

// injectTraceContext writes sc as the W3C propagator does (a traceparent
// of version 00 with the sampled and random flags, and the tracestate);
// empty for an invalid sc. It writes the 55 bytes itself: through the
// propagator's API, a context and a carrier cost 8 allocations an
// enqueue, where this costs the string.
func injectTraceContext(sc trace.SpanContext) (traceparent, tracestate string) {
	if !sc.IsValid() {
		return "", ""
	}
	var b [traceparentLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := [1]byte{byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))}
	b[0], b[1], b[2], b[35], b[52] = '0', '0', '-', '-', '-'
	hex.Encode(b[3:35], tid[:])
	hex.Encode(b[36:52], sid[:])
	hex.Encode(b[53:55], flags[:])
	return string(b[:]), sc.TraceState().String()
}

// traceCarrier carries the two W3C Trace Context fields between a job and
// the propagator: a propagation.TextMapCarrier without a map to make on
// every enqueue and attempt.
type traceCarrier struct{ traceparent, tracestate string }

func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.traceparent
	case "tracestate":
		return c.tracestate
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.traceparent = value
	case "tracestate":
		c.tracestate = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// ParseTraceContext checks a creation context given as W3C Trace Context
// headers and returns it in its canonical form (as the propagator writes
// it), or an error naming the field that is wrong: traceparent must be a
// valid W3C traceparent, and tracestate, optional, a valid tracestate
// with a traceparent.
func ParseTraceContext(traceparent, tracestate string) (string, string, error) {
	return normalizeTraceContext(traceparent, tracestate)
}

// normalizeTraceContext is ParseTraceContext, for EnqueueParams.Normalize.
func normalizeTraceContext(traceparent, tracestate string) (string, string, error) {
	switch {
	case traceparent == "":
		return "", "", invalid("tracestate", "needs a traceparent")
	case len(traceparent) > MaxTraceparentLen:
		return "", "", invalid("traceparent", "longer than %d bytes", MaxTraceparentLen)
	case len(tracestate) > MaxTracestateLen:
		return "", "", invalid("tracestate", "longer than %d bytes", MaxTracestateLen)
	}
	var ts trace.TraceState
	if tracestate != "" {
		var err error
		if ts, err = trace.ParseTraceState(tracestate); err != nil {
			return "", "", invalid("tracestate", "is not a W3C tracestate (key=value pairs separated by commas): %v", err)
		}
	}
	if _, ok := parseTraceparent(traceparent, ""); ok {
		// Canonical already (what a client's own enqueue writes): only a
		// tracestate may need rewriting, in the form it was just parsed to.
		return traceparent, ts.String(), nil
	}
	sc := extractTraceContext(traceparent, tracestate)
	if !sc.IsValid() {
		return "", "", invalid("traceparent", "is not a W3C traceparent (version-trace_id-parent_id-flags: 2, 32, 16 and 2 lower-case hex digits, the IDs not all zero)")
	}
	tp, state := injectTraceContext(sc)
	return tp, state, nil
}

// failSpan records err on span and marks it failed.
func failSpan(span trace.Span, err error) {
	markFailed(span, err)
	span.SetAttributes(semconv.ErrorType(err))
}

// markFailed records err on span and sets its status, leaving error.type
// to the caller (failSpan, or endProcess with the span's other
// attributes).
func markFailed(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// itoa is a job id in decimal.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// processSpans is what the process spans of one queue's attempts start
// with, made once per producer rather than once a span: the context of a
// root span, the span's name, and its start options (the SDK copies
// them). Made for each span, with trace.WithNewRoot adding an empty span
// context to each span's context, they cost the client 6 allocations a
// job.
type processSpans struct {
	root  context.Context // workCtx's values, with an empty span context
	queue string
	name  string
	opts  []trace.SpanStartOption // kind and the sampler's attributes
}

// processSpans returns the processSpans of queue, whose workers' contexts
// carry ctx's values; nil when t makes no spans.
func (t *Tracing) processSpans(ctx context.Context, queue string) *processSpans {
	if t == nil || t.tracer == nil {
		return nil
	}
	return &processSpans{
		// What trace.WithNewRoot would add to each span's context.
		root:  trace.ContextWithSpanContext(context.WithoutCancel(ctx), trace.SpanContext{}),
		queue: queue,
		name:  opProcess + " " + queue,
		opts:  processStartOptions(queue),
	}
}

// processStartOptions are the start options of a process span of queue.
func processStartOptions(queue string) []trace.SpanStartOption {
	return []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(systemAttr, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName(opProcess), semconv.MessagingDestinationName(queue)),
	}
}

// startProcess starts the process span of job's attempt (when ps is
// set) and notes when it began (for messaging.process.duration): a child
// of the job's creation context, linked to it too, or a root span for a
// job enqueued outside any trace. The span starts with the attributes the
// conventions ask samplers to be given (system, operation, destination);
// endProcess adds the rest in one call, with the outcome, which the SDK
// stores in one allocation instead of copying the start's and growing
// them again for the outcome (BenchmarkTracingSDKSpan).
func (r *run) startProcess(t *Tracing, ps *processSpans) {
	r.traced = &attemptTrace{}
	if t.metered {
		r.traced.began = time.Now()
	}
	if ps == nil {
		return
	}
	job := r.job
	name, opts := ps.name, ps.opts
	if job.Queue != ps.queue { // never from a producer's own claims
		name, opts = opProcess+" "+job.Queue, processStartOptions(job.Queue)
	}
	if sc := t.extract(job.Traceparent, job.Tracestate); sc.IsValid() {
		opts = append(opts[:len(opts):len(opts)], trace.WithLinks(trace.Link{SpanContext: sc}))
		_, r.traced.span = t.tracer.Start(trace.ContextWithRemoteSpanContext(ps.root, sc), name, opts...)
		return
	}
	_, r.traced.span = t.tracer.Start(ps.root, name, opts...)
}

// attemptTrace is what an attempt's span and measurement record when it
// ends (endProcess).
type attemptTrace struct {
	span    trace.Span // nil without a tracer
	began   time.Time
	outcome string
	err     error
	snooze  time.Duration
}

// setOutcome notes how the attempt ended, and its error if it failed.
func (r *run) setOutcome(outcome string, err error) {
	if r.traced != nil {
		r.traced.outcome, r.traced.err = outcome, err
	}
}

// endProcess ends the attempt's span with the job's attributes and the
// attempt's outcome, and records its duration. The attributes are
// made in w's buffer, which the next job of w reuses: spans copy what
// SetAttributes is given, as the SDK's do.
func (r *run) endProcess(t *Tracing, w *worker) {
	a := r.traced
	if a.span != nil {
		job := r.job
		attrs := append(w.attrs[:0], semconv.MessagingMessageID(itoa(job.ID)),
			attrJobAttempt.Int(job.Attempt), attrJobKind.String(job.Kind), attrJobOutcome.String(a.outcome))
		if job.Group != nil {
			attrs = append(attrs, attrJobGroup.String(*job.Group))
		}
		if a.outcome == outcomeSnoozed {
			attrs = append(attrs, attrSnoozeDelay.Float64(a.snooze.Seconds()))
		}
		if a.err != nil {
			attrs = append(attrs, semconv.ErrorType(a.err))
			markFailed(a.span, a.err)
		}
		a.span.SetAttributes(attrs...)
		w.attrs = attrs
		a.span.End()
	}
	if t.metered {
		d := time.Since(a.began).Seconds()
		if a.err != nil {
			t.process.Record(context.Background(), d, opProcess, MessagingSystem, t.process.AttrDestinationName(r.job.Queue), semconv.ErrorType(a.err))
		} else {
			t.process.Record(context.Background(), d, opProcess, MessagingSystem, t.process.AttrDestinationName(r.job.Queue))
		}
	}
}

// attemptOutcome is the outcome of a failed attempt of job: discarded
// (failed for good by the handler), failed (its last attempt) or
// retrying.
func attemptOutcome(job *Job, discard bool) string {
	switch {
	case discard:
		return outcomeDiscarded
	case job.Attempt >= job.MaxAttempts:
		return outcomeFailed
	}
	return outcomeRetrying
}
