package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// BenchFlowFanIn: 10,000 parents, one child, b.N times. The parents are
// completed in batches of 100 from 4 goroutines while a claim loop polls
// for the child every millisecond, as a busy worker would. Reports the
// time from the last parent's completion returning (its commit) to the
// child's claim: mean, p50, p99 and max over the iterations; and the
// parents' completion rate. Run by each store's BenchmarkFlowFanIn:
//
//	go test -run '^$' -bench FlowFanIn -benchtime 100x ./postgres/ ./sqlite/
func BenchFlowFanIn(b *testing.B, s readpast.Store) {
	ctx := context.Background()
	fs, isFS := s.(readpast.FlowStore)
	if !isFS {
		b.Skipf("%T keeps no flows", s)
	}
	const width = 10000
	var lat []time.Duration
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
		child, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "c", Queue: "fanin-child"}, After: edges}})
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
		lat = append(lat, max(0, (<-done).Sub(last)))
	}
	reportLatencies(b, lat, "child-claimed-after-last-parent")
	b.ReportMetric(rate/float64(b.N), "parents/s")
}

// reportLatencies reports the mean, p50, p99 and max of lat, in ms, as
// metrics named after what.
func reportLatencies(b *testing.B, lat []time.Duration, what string) {
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	b.ReportMetric(ms(sum)/float64(len(lat)), "ms-mean/"+what)
	b.ReportMetric(ms(at(0.5)), "ms-p50/"+what)
	b.ReportMetric(ms(at(0.99)), "ms-p99/"+what)
	b.ReportMetric(ms(lat[len(lat)-1]), "ms-max/"+what)
}

// BenchFlowPrune: 1,000 flows of five jobs (a chain of three, and two
// more after its head). A first PruneOnce pass runs with every flow's
// chain end still pending: each flow is walked and kept. A second, once
// every job has succeeded, deletes them all. Reports both passes, in ms,
// and the second's jobs/s. Run by each store's BenchmarkFlowPrune:
//
//	go test -run '^$' -bench FlowPrune -benchtime 3x ./postgres/ ./sqlite/
func BenchFlowPrune(b *testing.B, s readpast.Store) {
	ctx := context.Background()
	fs, isFS := s.(readpast.FlowStore)
	if !isFS {
		b.Skipf("%T keeps no flows", s)
	}
	const flows = 1000
	resolver, _ := s.(readpast.FlowResolver)
	run := func(queue string, n int) {
		for ran := 0; ran < n; {
			cs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Limit: 1000, Lease: time.Hour, Worker: "w"})
			if err != nil {
				b.Fatal(err)
			}
			if len(cs) == 0 && resolver != nil {
				// What a rescuer's tick does: the parents of a claim of
				// 1,000 leave most of their edges to the resolver.
				if _, err := resolver.ResolveFlows(ctx, 10000); err != nil {
					b.Fatal(err)
				}
			}
			done := make([]readpast.Completion, 0, len(cs))
			for _, c := range cs {
				done = append(done, readpast.Completion{ID: c.ID, Token: c.Token})
			}
			if _, err := s.Complete(ctx, done); err != nil {
				b.Fatal(err)
			}
			ran += len(cs)
		}
	}
	var keep, drop time.Duration
	for range b.N {
		for range flows {
			if _, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{
				{Ref: "a", Job: readpast.EnqueueParams{Kind: "k", Queue: "prune"}},
				{Ref: "b", Job: readpast.EnqueueParams{Kind: "k", Queue: "prune"}, After: []readpast.After{{Ref: "a"}}},
				{Ref: "c", Job: readpast.EnqueueParams{Kind: "k", Queue: "prune-end"}, After: []readpast.After{{Ref: "b"}}},
				{Job: readpast.EnqueueParams{Kind: "k", Queue: "prune"}, After: []readpast.After{{Ref: "a"}}},
				{Job: readpast.EnqueueParams{Kind: "k", Queue: "prune"}, After: []readpast.After{{Ref: "a"}}},
			}); err != nil {
				b.Fatal(err)
			}
		}
		run("prune", 4*flows)
		began := time.Now()
		n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond})
		if err != nil || n != 0 {
			b.Fatalf("the keeping pass deleted %d, %v", n, err)
		}
		keep += time.Since(began)
		run("prune-end", flows)
		began = time.Now()
		n, err = readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond})
		if err != nil || n != 5*flows {
			b.Fatalf("the deleting pass deleted %d, %v; want %d", n, err, 5*flows)
		}
		drop += time.Since(began)
	}
	b.ReportMetric(float64(keep.Microseconds())/1000/float64(b.N), "ms/pass-keeping-all")
	b.ReportMetric(float64(drop.Microseconds())/1000/float64(b.N), "ms/pass-deleting-all")
	b.ReportMetric(float64(5*flows*b.N)/drop.Seconds(), "jobs-deleted/s")
}
