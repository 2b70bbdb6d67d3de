package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/readpast/readpast"
)

// FlowBenchStore is a store that keeps flows and reads them.
type FlowBenchStore interface {
	readpast.FlowStore
	readpast.FlowInspector
}

// BenchFlowInspect reads a flow of 2,000 jobs in 20 layers of 100,
// each job after two of the layer above (the second half joins the
// first by id): FlowGraph of all of it from the top, Relatives of a job
// in the middle, and ParentResults of 100 children, the statement a claim
// of 100 jobs that asks for parent results adds.
// Run by each store's BenchmarkFlowInspect:
//
//	go test -run '^$' -bench FlowInspect -benchtime 20x ./postgres/ ./sqlite/
func BenchFlowInspect(b *testing.B, s FlowBenchStore) {
	ctx := context.Background()
	const width, layers = 100, 20
	var ids [][]int64
	for half := 0; half < 2; half++ {
		var flow []readpast.FlowJob
		for l := 0; l < layers/2; l++ {
			for i := 0; i < width; i++ {
				fj := readpast.FlowJob{Ref: fmt.Sprintf("j%d-%d", l, i), Job: readpast.EnqueueParams{Kind: "k", Queue: "insp"}}
				switch {
				case l > 0:
					fj.After = []readpast.After{{Ref: fmt.Sprintf("j%d-%d", l-1, i)}, {Ref: fmt.Sprintf("j%d-%d", l-1, (i+1)%width)}}
				case half > 0:
					above := ids[len(ids)-1]
					fj.After = []readpast.After{{JobID: above[i]}, {JobID: above[(i+1)%width]}}
				}
				flow = append(flow, fj)
			}
		}
		out, err := s.EnqueueFlow(ctx, flow)
		if err != nil {
			b.Fatal(err)
		}
		for l := 0; l < layers/2; l++ {
			layer := make([]int64, width)
			for i := range layer {
				layer[i] = out[l*width+i].ID
			}
			ids = append(ids, layer)
		}
	}
	b.Run("FlowGraph2000", func(b *testing.B) {
		for range b.N {
			g, err := s.FlowGraph(ctx, ids[0][0], 0)
			if err != nil || len(g.Jobs) != width*layers || g.Truncated {
				b.Fatalf("%d jobs, truncated %v, %v", len(g.Jobs), g.Truncated, err)
			}
		}
	})
	b.Run("FlowGraph100", func(b *testing.B) {
		for range b.N {
			g, err := s.FlowGraph(ctx, ids[10][0], 100)
			if err != nil || len(g.Jobs) != 100 || !g.Truncated {
				b.Fatalf("%d jobs, truncated %v, %v", len(g.Jobs), g.Truncated, err)
			}
		}
	})
	b.Run("Relatives", func(b *testing.B) {
		for range b.N {
			p, c, err := s.Relatives(ctx, ids[10][5], 0)
			if err != nil || len(p) != 2 || len(c) != 2 {
				b.Fatalf("%d parents, %d children, %v", len(p), len(c), err)
			}
		}
	})
	b.Run("ParentResults100", func(b *testing.B) {
		for range b.N {
			r, err := s.ParentResults(ctx, ids[10])
			if err != nil || len(r) != width {
				b.Fatalf("%d jobs with parents, %v", len(r), err)
			}
		}
	})
}
