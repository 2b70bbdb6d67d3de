package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// BenchKeys measures what a job's later keys cost its claim and its
// completion: jobs of 1,000 first keys ("c:0" ...) naming no more keys,
// or one more key among 10 ("api:0" ...), none of them a bound that
// stops a job (concurrency 1,000 each). Each round enqueues 1,000 jobs,
// then claims them 100 at a time and completes each claim's jobs in one
// call; only the claims and completions are timed, reported as us/job.
func BenchKeys(b *testing.B, s readpast.Store) {
	ctx := context.Background()
	const n, batch = 1000, 100
	for _, l := range []readpast.Limit{{Key: "c:*", Concurrency: 1000}, {Key: "api:*", Concurrency: 1000}} {
		if _, err := s.PutLimit(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	for _, more := range []int{0, 1} {
		b.Run(fmt.Sprintf("keys=%d", more+1), func(b *testing.B) {
			var timed time.Duration
			jobs := 0
			for round := 0; round < b.N; round++ {
				ps := make([]readpast.EnqueueParams, n)
				for i := range ps {
					ps[i] = readpast.EnqueueParams{Kind: "k", Keys: []string{fmt.Sprint("c:", i)}}
					if more > 0 {
						ps[i].Keys = append(ps[i].Keys, fmt.Sprint("api:", i%10))
					}
				}
				if _, err := s.Enqueue(ctx, ps); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for left := n; left > 0; {
					got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "bench", Limit: batch, Lease: time.Minute})
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 {
						b.Fatalf("claimed nothing with %d jobs left", left)
					}
					cs := make([]readpast.Completion, len(got))
					for i, j := range got {
						cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
					}
					if err := joinErrs(s.Complete(ctx, cs)); err != nil {
						b.Fatal(err)
					}
					left -= len(got)
					jobs += len(got)
				}
				timed += time.Since(start)
			}
			b.ReportMetric(float64(timed.Microseconds())/float64(jobs), "us/job")
		})
	}
}
