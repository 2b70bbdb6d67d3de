package readpast

import (
	"context"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagatorExtract is what the W3C propagator reads from the two fields.
func propagatorExtract(traceparent, tracestate string) trace.SpanContext {
	carrier := &traceCarrier{traceparent: traceparent, tracestate: tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// propagatorInject is what the W3C propagator writes for sc.
func propagatorInject(sc trace.SpanContext) (string, string) {
	var carrier traceCarrier
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), &carrier)
	return carrier.traceparent, carrier.tracestate
}

// checkLikePropagator fails t unless extractTraceContext and
// injectTraceContext agree with the propagator on tp and ts, and
// parseTraceparent accepts only what the propagator reads as valid, in
// the form it writes.
func checkLikePropagator(t *testing.T, tp, ts string) {
	t.Helper()
	want := propagatorExtract(tp, ts)
	if got := extractTraceContext(tp, ts); !got.Equal(want) {
		t.Fatalf("extract(%q, %q) = %v, the propagator reads %v", tp, ts, got, want)
	}
	if sc, ok := parseTraceparent(tp, ts); ok {
		if !want.IsValid() || !sc.Equal(want) {
			t.Fatalf("parseTraceparent(%q) = %v, the propagator reads %v", tp, sc, want)
		}
		if wtp, _ := propagatorInject(want); wtp != tp {
			t.Fatalf("parseTraceparent took %q, which the propagator writes as %q", tp, wtp)
		}
	}
	gtp, gts := injectTraceContext(want)
	wtp, wts := propagatorInject(want)
	if gtp != wtp || gts != wts {
		t.Fatalf("inject(%v) = %q, %q; the propagator writes %q, %q", want, gtp, gts, wtp, wts)
	}
	// Flags the propagator keeps are written as it writes them.
	local := trace.NewSpanContext(trace.SpanContextConfig{TraceID: want.TraceID(), SpanID: want.SpanID(), TraceFlags: 0xff, TraceState: want.TraceState()})
	if g, _ := injectTraceContext(local); want.IsValid() {
		if w, _ := propagatorInject(local); g != w {
			t.Fatalf("inject with flags ff = %q, the propagator writes %q", g, w)
		}
	}
}

// TestTraceparentLikeThePropagator compares the fast reading and writing
// of a creation context with the W3C propagator's, over hand-picked and
// mutated traceparents.
func TestTraceparentLikeThePropagator(t *testing.T) {
	const good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cases := []string{
		good,
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-02",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-04",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff",
		"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-B7AD6B7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0A",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-09-extra",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"",
	}
	states := []string{"", "rojo=00f067aa0ba902b7", "a=1,b=2", "a=1, b=2", "bad state", "a=1,a=2"}
	for _, tp := range cases {
		for _, ts := range states {
			checkLikePropagator(t, tp, ts)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789abcdefABCDEF-gz "
	for range 200_000 {
		b := []byte(good)
		for n := rng.IntN(3); n >= 0; n-- {
			switch i := rng.IntN(len(b)); rng.IntN(4) {
			case 0, 1:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 2:
				b = append(b[:i:i], b[i+1:]...)
			default:
				b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		checkLikePropagator(t, string(b), states[rng.IntN(len(states))])
	}
}

// TestCanonicalTraceContextAllocatesNothing pins the point of the fast
// path: a client's own enqueue, normalised, and each attempt reading its
// job's context allocate nothing.
func TestCanonicalTraceContextAllocatesNothing(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if n := testing.AllocsPerRun(100, func() { extractTraceContext(tp, "") }); n != 0 {
		t.Errorf("extract: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := normalizeTraceContext(tp, ""); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("normalize: %v allocations", n)
	}
}
