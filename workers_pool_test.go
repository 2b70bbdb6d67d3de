package readpast_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// workerGoroutines counts the goroutines that are a producer's workers.
func workerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "readpast.(*producer).worker(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWorkerGoroutines: a queue runs its jobs on at most MaxWorkers
// goroutines, which it reuses from job to job and retires once idle,
// and which are all gone once the client has stopped.
func TestWorkerGoroutines(t *testing.T) {
	ctx := context.Background()
	s := newSQLiteStore(t)
	// 200 jobs: SQLite under -race runs about 80 a second here, far
	// fewer on a loaded CI machine.
	const n, pool = 200, 8
	// Workers of earlier tests' clients may still be ending (a handler
	// that ignored its cancellation is left behind): they are not this
	// pool's.
	before := int32(workerGoroutines())
	var done, most atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		if done.Add(1)%10 == 0 {
			if g := int32(workerGoroutines()); g > most.Load() {
				most.Store(g)
			}
		}
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w, PollInterval: 50 * time.Millisecond,
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: pool}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	params := make([]readpast.EnqueueParams, n)
	for i := range params {
		params[i] = readpast.EnqueueParams{Kind: "k"}
	}
	if _, err := c.Enqueue(ctx, params...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the jobs", func() bool { return done.Load() == n })
	if m := most.Load() - before; m < 1 || m > pool {
		t.Fatalf("%d worker goroutines at once, for a pool of %d (%d of earlier tests before)", m, pool, before)
	}
	waitFor(t, 5*time.Second, "the idle workers to be retired", func() bool { return int32(workerGoroutines()) <= 1+before })
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the workers to exit after Stop", func() bool { return int32(workerGoroutines()) <= before })
}

// TestHandlerGoexit: a handler that ends its goroutine (runtime.Goexit,
// as t.FailNow does) frees its slot like any other: the queue goes on
// with the next jobs, and Stop does not wait for it. Its job was never
// completed, so it is still running, until its lease expires.
func TestHandlerGoexit(t *testing.T) {
	ctx := context.Background()
	s := newSQLiteStore(t)
	exits, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "exit", Priority: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("exit", func(ctx context.Context, job *readpast.Job) (any, error) {
		runtime.Goexit()
		return nil, nil
	}, nil)
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		done.Add(1)
		return nil, nil
	}, nil)
	c := startClient(t, s, readpast.Config{Workers: w, Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 1}}})
	waitFor(t, 5*time.Second, "the exiting job to be claimed", func() bool { return stateOf(t, s, exits[0].ID).State == readpast.StateRunning })
	if _, err := c.Enqueue(ctx, readpast.EnqueueParams{Kind: "k"}, readpast.EnqueueParams{Kind: "k"}, readpast.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the jobs after it, on its one slot", func() bool { return done.Load() == 3 })
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if st := stateOf(t, s, exits[0].ID).State; st != readpast.StateRunning {
		t.Fatalf("the job whose handler exited is %s, want running (until its lease expires)", st)
	}
}

// startKey is a context key of TestHandlerContextValues.
type startKey struct{}

// TestHandlerContextValues: a handler's context carries the values of the
// context Start was given (loggers, tracing), though not its cancellation.
func TestHandlerContextValues(t *testing.T) {
	s := newSQLiteStore(t)
	got := make(chan any, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		got <- ctx.Value(startKey{})
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithCancel(context.WithValue(context.Background(), startKey{}, "from Start"))
	if err := c.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	cancel() // Start's context ending does not stop the client
	t.Cleanup(func() { c.Stop(context.Background()) })
	if _, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		if v != "from Start" {
			t.Fatalf("the handler's context carries %v, want Start's value", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job never ran")
	}
}
