package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
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

// BenchmarkFlowFanIn: 10,000 parents, one child. The parents are
// completed in batches of 100 from 4 goroutines; reports how long after
// the last completion returned the child was claimed (a claim loop polls
// meanwhile, as a busy worker would), and the parents' completion rate.
//
//	go test -run '^$' -bench FlowFanIn -benchtime 3x ./postgres/
func BenchmarkFlowFanIn(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	const width = 10000
	var after time.Duration
	var rate float64
	for range b.N {
		parents := make([]readpast.EnqueueParams, width)
		for i := range parents {
			parents[i] = readpast.EnqueueParams{Kind: "p", Queue: "fanin"}
		}
		ps, err := s.Enqueue(ctx, parents)
		if err != nil {
			b.Fatal(err)
		}
		edges := make([]readpast.After, width)
		for i, p := range ps {
			edges[i] = readpast.After{JobID: p.ID}
		}
		child, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c", Queue: "fanin-child"}, After: edges}})
		if err != nil {
			b.Fatal(err)
		}
		var claimed []*readpast.Job
		for len(claimed) < width {
			cs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"fanin"}, Limit: 1000, Lease: time.Hour, Worker: "w"})
			if err != nil {
				b.Fatal(err)
			}
			claimed = append(claimed, cs...)
		}
		done := make(chan time.Time, 1)
		go func() {
			for {
				cs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"fanin-child"}, Limit: 1, Lease: time.Hour, Worker: "w"})
				if err != nil {
					b.Error(err)
					done <- time.Now()
					return
				}
				if len(cs) == 1 && cs[0].ID == child[0].ID {
					done <- time.Now()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		began := time.Now()
		errc := make(chan error, 4)
		var last time.Time
		var mu sync.Mutex
		for w := range 4 {
			go func() {
				for k := w * 100; k < width; k += 400 {
					batch := make([]readpast.Completion, 0, 100)
					for _, c := range claimed[k:min(k+100, width)] {
						batch = append(batch, readpast.Completion{ID: c.ID, Token: c.Token})
					}
					if _, err := s.Complete(ctx, batch); err != nil {
						errc <- err
						return
					}
					mu.Lock()
					last = time.Now()
					mu.Unlock()
				}
				errc <- nil
			}()
		}
		for range 4 {
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
		rate += width / time.Since(began).Seconds()
		after += (<-done).Sub(last)
	}
	b.ReportMetric(float64(after.Microseconds())/1000/float64(b.N), "ms/child-claimed-after-last-parent")
	b.ReportMetric(rate/float64(b.N), "parents/s")
}

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
