package history

import (
	"context"
	"testing"

	"github.com/readpast/readpast"
)

// resolverStore is a store that leaves flows' edges to a resolver.
type resolverStore struct {
	readpast.Store
	asked int
}

func (s *resolverStore) ResolveFlows(ctx context.Context, limit int) (int, error) {
	s.asked = limit
	return 7, nil
}

// TestWrapResolvesFlows: a wrapped store is still a flow resolver, so that
// a Client's rescuer on it resolves what wide flows leave.
func TestWrapResolvesFlows(t *testing.T) {
	inner := &resolverStore{}
	var w readpast.Store = Wrap(inner, nil)
	r, ok := w.(readpast.FlowResolver)
	if !ok {
		t.Fatal("the wrapper is no FlowResolver")
	}
	if n, err := r.ResolveFlows(context.Background(), 100); n != 7 || err != nil || inner.asked != 100 {
		t.Fatalf("ResolveFlows through the wrapper: %d, %v; the store was asked for %d", n, err, inner.asked)
	}
	if n, err := Wrap(struct{ readpast.Store }{}, nil).ResolveFlows(context.Background(), 100); n != 0 || err != nil {
		t.Fatalf("ResolveFlows on a store without a resolver: %d, %v", n, err)
	}
}
