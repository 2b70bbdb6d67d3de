package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// gateStore holds the write the test arms until the test lets it go, and
// then behaves as a PostgreSQL store may when its context was cancelled
// mid-statement: the write commits, but the call reports the cancellation.
type gateStore struct {
	readpast.Store
	mu      sync.Mutex
	armed   string
	entered chan string
	proceed chan struct{}
	// seen receives the context error the held call had after it was let go.
	seen chan error
}

func newGateStore(s readpast.Store) *gateStore {
	return &gateStore{Store: s, entered: make(chan string, 1), proceed: make(chan struct{}), seen: make(chan error, 1)}
}

func (g *gateStore) arm(op string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = op
}

// hold blocks the call op when it is armed, and reports whether it did.
func (g *gateStore) hold(op string) bool {
	g.mu.Lock()
	held := g.armed == op
	if held {
		g.armed = ""
	}
	g.mu.Unlock()
	if held {
		g.entered <- op
		<-g.proceed
	}
	return held
}

// gate runs the store call op as a PostgreSQL store may run it: committed
// whatever happens to ctx, but reported as cancelled when ctx ended.
func gate[T any](g *gateStore, ctx context.Context, op string, call func(context.Context) (T, error)) (T, error) {
	held := g.hold(op)
	v, err := call(context.WithoutCancel(ctx))
	if held {
		g.seen <- ctx.Err()
	}
	if cerr := ctx.Err(); cerr != nil {
		var zero T
		return zero, cerr
	}
	return v, err
}

func (g *gateStore) Enqueue(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
	return gate(g, ctx, "enqueue", func(ctx context.Context) ([]*readpast.Job, error) { return g.Store.Enqueue(ctx, ps) })
}

func (g *gateStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	return gate(g, ctx, "claim", func(ctx context.Context) ([]*readpast.Job, error) { return g.Store.Claim(ctx, p) })
}

func (g *gateStore) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	return gate(g, ctx, "complete", func(ctx context.Context) ([]error, error) { return g.Store.Complete(ctx, cs) })
}

func (g *gateStore) Fail(ctx context.Context, fs []readpast.Failure) ([]error, error) {
	return gate(g, ctx, "fail", func(ctx context.Context) ([]error, error) { return g.Store.Fail(ctx, fs) })
}

func (g *gateStore) Extend(ctx context.Context, id int64, token string, lease time.Duration) (time.Time, error) {
	return gate(g, ctx, "heartbeat", func(ctx context.Context) (time.Time, error) { return g.Store.Extend(ctx, id, token, lease) })
}

func (g *gateStore) Release(ctx context.Context, id int64, token string) error {
	_, err := gate(g, ctx, "release", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.Store.Release(ctx, id, token)
	})
	return err
}

func (g *gateStore) Cancel(ctx context.Context, id int64) (*readpast.Job, error) {
	return gate(g, ctx, "cancel", func(ctx context.Context) (*readpast.Job, error) { return g.Store.Cancel(ctx, id) })
}

// TestWritesOutliveTheClient disconnects the client while each write is in
// the store, and requires the write to run to its end: a write cancelled
// mid-statement may commit while reporting an error, leaving the handler
// (its metrics, and for a claim the release of the jobs) at odds with the
// database.
func TestWritesOutliveTheClient(t *testing.T) {
	base := newEnv(t, nil)
	g := newGateStore(base.store)
	h, err := New(Config{Store: g, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The request under test is marked, so its context can be watched.
	reqCtx := make(chan context.Context, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Watch") != "" {
			reqCtx <- r.Context()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e := &testEnv{t: t, store: base.store, srv: srv}

	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// abandon sends the request, disconnects while op is held in the
	// store, waits until the server has seen the client go, lets op go on
	// and returns the context error op saw then.
	abandon := func(op, path, body string) error {
		t.Helper()
		g.arm(op)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			e.request(ctx, "POST", path, body, "", "", map[string]string{"X-Watch": "1"})
		}()
		var rctx context.Context
		select {
		case rctx = <-reqCtx:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: request did not arrive", op)
		}
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: store call did not start", op)
		}
		cancel()
		wait(op+": the server to see the client go", rctx.Done())
		wait(op+": the client to return", sent)
		g.proceed <- struct{}{}
		select {
		case err := <-g.seen:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: store call did not end", op)
		}
		return nil
	}
	// state polls the job until cond holds, or fails.
	state := func(id int64, what string, cond func(Job) bool) {
		t.Helper()
		var j Job
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if j = e.get(id); cond(j) {
				return
			}
		}
		t.Errorf("%s: job = %+v", what, j)
	}

	// A claim for a client that went away runs to its end, and the job is
	// then released at once, without using an attempt.
	j := e.enqueue(`{"kind":"a"}`)
	if err := abandon("claim", "/v1/claim", `{"worker":"gone"}`); err != nil {
		t.Errorf("claim: the store saw %v after the client went away", err)
	}
	state(j.ID, "claim for a client that went away", func(j Job) bool {
		return j.State == readpast.StatePending && j.Attempt == 0 && j.LeaseExpiresAt == nil
	})

	// Each worker write, on a job of its own.
	for _, c := range []struct{ op, body string }{
		{"heartbeat", `{"token":"%s","lease_seconds":600}`},
		{"release", `{"token":"%s"}`},
		{"fail", `{"token":"%s","error":"x","retry_at":"2000-01-01T00:00:00Z"}`},
		{"complete", `{"token":"%s"}`},
	} {
		jc := e.enqueue(`{"kind":"` + c.op + `","queue":"` + c.op + `"}`)
		claimed := e.claim(`{"worker":"w","queues":["` + c.op + `"]}`)
		if len(claimed) != 1 || claimed[0].ID != jc.ID {
			t.Fatalf("%s: claimed %+v", c.op, claimed)
		}
		body := fmt.Sprintf(c.body, claimed[0].Token)
		if err := abandon(c.op, "/v1/jobs/"+itoa(jc.ID)+"/"+c.op, body); err != nil {
			t.Errorf("%s: the store saw %v after the client went away", c.op, err)
		}
		if c.op == "complete" {
			state(jc.ID, "complete for a client that went away", func(j Job) bool { return j.State == readpast.StateSucceeded })
		}
	}

	if err := abandon("enqueue", "/v1/jobs", `{"kind":"b"}`); err != nil {
		t.Errorf("enqueue: the store saw %v after the client went away", err)
	}
	j2 := e.enqueue(`{"kind":"c"}`)
	if err := abandon("cancel", "/v1/jobs/"+itoa(j2.ID)+"/cancel", ``); err != nil {
		t.Errorf("cancel: the store saw %v after the client went away", err)
	}
}
