package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/readpast/readpast"
)

// W3C Trace Context headers an enqueue reads (POST /v1/jobs and
// /v1/jobs/batch).
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// tracingKey is the request context key of the handler's *readpast.Tracing.
type tracingKey struct{}

// WithTracing returns h with its enqueues traced by t (readpast.NewTracing):
// each POST /v1/jobs and /v1/jobs/batch makes the producer spans of
// readpast.Tracing.Enqueue, children of the request's traceparent header
// when it has one, and the jobs keep the context of those spans instead
// of the header's. Without it (or with a nil t) a request's traceparent
// and tracestate are stored on its jobs as they are. t is the server's
// own, never a global one.
func WithTracing(h http.Handler, t *readpast.Tracing) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tracingKey{}, t)))
	})
}

// traceHeaders reads the traceparent and tracestate headers of r, checked
// and in canonical form; empty when r has none. A malformed one, or more
// than one traceparent, is refused with an error naming the header.
func traceHeaders(r *http.Request) (traceparent, tracestate string, ae *apiError) {
	parents := r.Header.Values(HeaderTraceparent)
	states := r.Header.Values(HeaderTracestate)
	switch {
	case len(parents) == 0 && len(states) == 0:
		return "", "", nil
	case len(parents) > 1:
		return "", "", fieldError(HeaderTraceparent, "header given more than once")
	case len(parents) == 0:
		return "", "", fieldError(HeaderTracestate, "header given without a traceparent header")
	}
	// Several tracestate headers are one list (W3C Trace Context).
	tp, ts, err := readpast.ParseTraceContext(parents[0], strings.Join(states, ","))
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return "", "", fieldError(fe.Field, "header %s", fe.Message)
		}
		return "", "", fieldError(HeaderTraceparent, "header %v", err)
	}
	return tp, ts, nil
}

// enqueueTraced enqueues ps for r: traced when the handler has a Tracing
// (WithTracing), the producer spans children of r's trace context
// (traceparent, tracestate); otherwise with that context stored on each
// job as it is.
func (s *server) enqueueTraced(ctx context.Context, r *http.Request, traceparent, tracestate string, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
	return s.insertTraced(ctx, r, traceparent, tracestate, ps, s.store.Enqueue)
}

// insertTraced is enqueueTraced storing the jobs with insert (a flow's,
// a batch's) instead of the store's Enqueue.
func (s *server) insertTraced(ctx context.Context, r *http.Request, traceparent, tracestate string,
	ps []readpast.EnqueueParams, insert readpast.InsertFunc) ([]*readpast.Job, error) {
	t, _ := r.Context().Value(tracingKey{}).(*readpast.Tracing)
	if t == nil {
		if traceparent != "" {
			for i := range ps {
				ps[i].Traceparent, ps[i].Tracestate = traceparent, tracestate
			}
		}
		return insert(ctx, ps)
	}
	if traceparent != "" {
		carrier := propagation.MapCarrier{HeaderTraceparent: traceparent}
		if tracestate != "" {
			carrier[HeaderTracestate] = tracestate
		}
		ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	}
	return t.Enqueue(ctx, ps, insert)
}
