package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestFlowBacklogWakesTheResolver: a parent of more children than its own
// final statement resolves (the rest go to the resolver's backlog) tells
// every listening store (NOTIFY 'backlog'), and a Client's rescuer
// resolves them at once: with a rescue interval of an hour, the children
// beyond the inline budget run only through that wake.
func TestFlowBacklogWakesTheResolver(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const children = 400 // past the 128 edges a transaction resolves inline
	var ran atomic.Int64
	done := make(chan struct{})
	w := readpast.NewWorkers()
	w.Handle("parent", func(ctx context.Context, job *readpast.Job) (any, error) { return nil, nil }, nil)
	w.Handle("child", func(ctx context.Context, job *readpast.Job) (any, error) {
		if ran.Add(1) == children {
			close(done)
		}
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w, RescueInterval: time.Hour,
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 50}}})
	if err != nil {
		t.Fatal(err)
	}
	// The parent runs a second after the start, past the rescuer's first
	// tick (at the start, with nothing to resolve).
	flow := []readpast.FlowJob{{Ref: "p", Job: readpast.EnqueueParams{Kind: "parent", RunAt: time.Now().Add(time.Second)}}}
	for range children {
		flow = append(flow, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "child"}, After: []readpast.After{{Ref: "p"}}})
	}
	if _, err := s.EnqueueFlow(ctx, flow); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	started := time.Now()
	select {
	case <-done:
		t.Logf("%d children ran %v after the start (the parent due 1 s after it)", children, time.Since(started).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of %d children ran in 30 s: the resolver was not woken (rescue interval an hour)", ran.Load(), children)
	}
}
