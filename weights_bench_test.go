package readpast_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// BenchmarkWeightedShares measures how closely backlogged keys' starts
// follow their weights: 32 keys of weights 1-4 (8 each) with 1,000 jobs
// each, claimed by 1 or 4 goroutines in claims of 1 or 8 jobs, each
// claim's jobs completed at once, until 12,000 have started. It reports
// the starts of the keys of weight 4 over those of weight 1 (w4/w1; 4 is
// exact) and Jain's index of the starts per unit of weight (1 is exact).
//
//	go test -run '^$' -bench WeightedShares -benchtime 1x .
func BenchmarkWeightedShares(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		for _, claimers := range []int{1, 4} {
			for _, size := range []int{1, 8} {
				b.Run(fmt.Sprintf("%s/claimers=%d/size=%d", store, claimers, size), func(b *testing.B) {
					var ratio, jain float64
					for b.Loop() {
						var s readpast.Store
						if store == "postgres" {
							s = benchPG(b)
						} else {
							sq, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "w.db"), sqlite.Options{})
							if err != nil {
								b.Fatal(err)
							}
							defer sq.Close()
							s = sq
						}
						ratio, jain = weightedShares(b, s, claimers, size)
					}
					b.ReportMetric(ratio, "w4/w1")
					b.ReportMetric(jain, "jain")
				})
			}
		}
	}
}

func weightedShares(b *testing.B, s readpast.Store, claimers, size int) (ratio, jain float64) {
	ctx := context.Background()
	const keys, perKey, starts = 32, 1000, 12000
	weight := func(k int) int { return k%4 + 1 }
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "w:*", Concurrency: readpast.MaxConcurrency}); err != nil {
		b.Fatal(err)
	}
	for k := range keys {
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: fmt.Sprint("w:", k), Concurrency: readpast.MaxConcurrency, Weight: weight(k)}); err != nil {
			b.Fatal(err)
		}
		ps := make([]readpast.EnqueueParams, perKey)
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "k", Group: fmt.Sprint("w:", k)}
		}
		if _, err := s.Enqueue(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Millisecond) // every run-at is past
	var (
		mu       sync.Mutex
		byWeight [5]int
		total    int
		wg       sync.WaitGroup
	)
	for range claimers {
		wg.Go(func() {
			for {
				mu.Lock()
				done := total >= starts
				mu.Unlock()
				if done {
					return
				}
				js, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: size, Lease: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				cs := make([]readpast.Completion, len(js))
				mu.Lock()
				for i, j := range js {
					var k int
					fmt.Sscanf(*j.Group, "w:%d", &k)
					byWeight[weight(k)]++
					total++
					cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
				}
				mu.Unlock()
				if _, err := s.Complete(ctx, cs); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var sum, squares float64
	for w := 1; w <= 4; w++ {
		x := float64(byWeight[w]) / float64(w)
		sum += x
		squares += x * x
	}
	b.Logf("%d claimers of %d: starts by weight 1-4 %v", claimers, size, byWeight[1:])
	return float64(byWeight[4]) / float64(byWeight[1]), sum * sum / (4 * squares)
}
