package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// chainFlow is a flow of n jobs in queue q, each after the one before (by
// ref, cancel_child).
func chainFlow(q string, n int) []readpast.FlowJob {
	jobs := make([]readpast.FlowJob, n)
	for i := range jobs {
		jobs[i] = readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: readpast.EnqueueParams{Kind: "k", Queue: q}}
		if i > 0 {
			jobs[i].After = []readpast.After{{Ref: fmt.Sprint("j", i-1)}}
		}
	}
	return jobs
}

// BenchmarkFlowChainCancel: the cancellation of the top of a chain as
// deep as readpast.MaxFlowDepth allows (and of shorter ones), which
// cancels every job below it in the same write transaction. Reports the
// time per cancellation and per level of the chain.
//
//	go test -run '^$' -bench FlowChainCancel ./sqlite/
func BenchmarkFlowChainCancel(b *testing.B) {
	ctx := context.Background()
	s := openTemp(b)
	// Other jobs and finished history, so that a scan would show.
	for range 10 {
		if _, err := s.Enqueue(ctx, make1000("other")); err != nil {
			b.Fatal(err)
		}
	}
	for _, depth := range []int{10, readpast.MaxFlowDepth} {
		b.Run(fmt.Sprint(depth), func(b *testing.B) {
			var took time.Duration
			for range b.N {
				out, err := s.EnqueueFlow(ctx, chainFlow("chain", depth+1))
				if err != nil {
					b.Fatal(err)
				}
				began := time.Now()
				if _, err := s.Cancel(ctx, out[0].ID); err != nil {
					b.Fatal(err)
				}
				took += time.Since(began)
				last, err := s.Get(ctx, out[len(out)-1].ID)
				if err != nil || last.State != readpast.StateCancelled {
					b.Fatalf("the chain's last job after its top was cancelled: %+v, %v", last, err)
				}
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/cancel")
			b.ReportMetric(float64(took.Microseconds())/float64(b.N*depth), "µs/level")
		})
	}
}

func make1000(q string) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, 1000)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: q}
	}
	return ps
}
