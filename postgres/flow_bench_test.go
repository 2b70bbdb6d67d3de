package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/storetest"
)

// BenchmarkFlowFanOut: one parent, 100, 1,000 and 10,000 children.
// Reports how long the parent's completion takes (it resolves its first
// edges itself and leaves the rest to the resolver, which runs at once
// here, as at a rescuer's tick), how long until every child is pending
// (claimable: the resolver is done) and until every child has been
// claimed and completed, in claims of 1,000.
//
//	go test -run '^$' -bench FlowFanOut -benchtime 3x ./postgres/
func BenchmarkFlowFanOut(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	for _, width := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(width), func(b *testing.B) {
			var complete, released, claimable time.Duration
			for range b.N {
				jobs := make([]readpast.FlowJob, 0, width+1)
				jobs = append(jobs, readpast.FlowJob{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "fan"}})
				for range width {
					jobs = append(jobs, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "c", Queue: "fan"}, After: []readpast.After{{Ref: "p"}}})
				}
				// Flows hold at most MaxFlowJobs: the children beyond join by id.
				head, err := s.EnqueueFlow(ctx, jobs[:min(len(jobs), readpast.MaxFlowJobs)])
				if err != nil {
					b.Fatal(err)
				}
				for rest := jobs[min(len(jobs), readpast.MaxFlowJobs):]; len(rest) > 0; {
					n := min(len(rest), readpast.MaxFlowJobs)
					chunk := make([]readpast.FlowJob, n)
					for i := range chunk {
						chunk[i] = readpast.FlowJob{Job: rest[i].Job, After: []readpast.After{{JobID: head[0].ID}}}
					}
					if _, err := s.EnqueueFlow(ctx, chunk); err != nil {
						b.Fatal(err)
					}
					rest = rest[n:]
				}
				p, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"fan"}, Limit: 1, Lease: time.Minute, Worker: "w"})
				if err != nil || len(p) != 1 {
					b.Fatal(err, p)
				}
				began := time.Now()
				if err := first(s.Complete(ctx, []readpast.Completion{{ID: p[0].ID, Token: p[0].Token}})); err != nil {
					b.Fatal(err)
				}
				complete += time.Since(began)
				// The rescuer's tick resolves what the parent left
				// (RunRescuer, every 250 ms by default).
				resolved := make(chan error, 1)
				var resolvedIn time.Duration
				go func() {
					_, err := s.ResolveFlows(ctx, width)
					resolvedIn = time.Since(began) // every child pending: claimable
					resolved <- err
				}()
				for got := 0; got < width; {
					cs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"fan"}, Limit: 1000, Lease: time.Minute, Worker: "w"})
					if err != nil {
						b.Fatal(err)
					}
					got += len(cs)
					done := make([]readpast.Completion, len(cs))
					for i, c := range cs {
						done[i] = readpast.Completion{ID: c.ID, Token: c.Token}
					}
					if _, err := s.Complete(ctx, done); err != nil {
						b.Fatal(err)
					}
					if got == width {
						claimable += time.Since(began)
					}
				}
				if err := <-resolved; err != nil {
					b.Fatal(err)
				}
				released += resolvedIn
			}
			b.ReportMetric(float64(complete.Milliseconds())/float64(b.N), "ms/parent-completion")
			b.ReportMetric(float64(released.Milliseconds())/float64(b.N), "ms/all-children-released")
			b.ReportMetric(float64(claimable.Milliseconds())/float64(b.N), "ms/all-children-claimed")
		})
	}
}

// BenchmarkFlowFanIn: storetest.BenchFlowFanIn.
//
//	go test -run '^$' -bench FlowFanIn -benchtime 100x ./postgres/
func BenchmarkFlowFanIn(b *testing.B) { storetest.BenchFlowFanIn(b, newStore(b)) }

// BenchmarkFlowChainCancel: cancelling the top of a chain of
// readpast.MaxFlowDepth+1 jobs cancels the whole chain, one level per
// trigger, within the transaction's budget of inline edges.
//
//	go test -run '^$' -bench FlowChainCancel -benchtime 5x ./postgres/
func BenchmarkFlowChainCancel(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	for range b.N {
		b.StopTimer()
		jobs := make([]readpast.FlowJob, readpast.MaxFlowDepth+1)
		for i := range jobs {
			jobs[i] = readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: readpast.EnqueueParams{Kind: "k", Queue: "chain"}}
			if i > 0 {
				jobs[i].After = []readpast.After{{Ref: fmt.Sprint("j", i-1)}}
			}
		}
		out, err := s.EnqueueFlow(ctx, jobs)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.Cancel(ctx, out[0].ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlowPrune: storetest.BenchFlowPrune.
//
//	go test -run '^$' -bench FlowPrune -benchtime 3x ./postgres/
func BenchmarkFlowPrune(b *testing.B) { storetest.BenchFlowPrune(b, newStore(b)) }
