package sqlite_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/storetest"
)

// benchJobs is how many jobs each BenchmarkDrain iteration drains.
const benchJobs = 100_000

// BenchmarkDrain pre-inserts 100,000 jobs (outside the timer), then drains
// them with a few goroutines that claim a batch, then complete it in one
// call. It reports jobs/s.
//
//	go test -run '^$' -bench BenchmarkDrain -benchtime 3x ./sqlite/
func BenchmarkDrain(b *testing.B) {
	for _, bc := range []struct{ workers, batch int }{
		{1, 100}, {4, 100}, {4, 1000},
	} {
		b.Run(fmt.Sprintf("workers=%d/batch=%d", bc.workers, bc.batch), func(b *testing.B) {
			benchDrain(b, bc.workers, bc.batch)
		})
	}
}

func benchDrain(b *testing.B, workers, batch int) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ps := make([]readpast.EnqueueParams, benchJobs)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "bench", Payload: []byte(`{"n":1}`), Priority: i % 3}
	}
	var drained time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := s.Enqueue(ctx, ps); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		var done atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done.Load() < benchJobs {
					jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", w), Limit: batch, Lease: time.Minute})
					if err != nil {
						b.Error(err)
						return
					}
					if len(jobs) == 0 {
						time.Sleep(time.Millisecond)
						continue
					}
					cs := make([]readpast.Completion, len(jobs))
					for i, j := range jobs {
						cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
					}
					res, err := s.Complete(ctx, cs)
					if err != nil {
						b.Error(err)
						return
					}
					for _, e := range res {
						if e != nil {
							b.Error(e)
							return
						}
					}
					done.Add(int64(len(jobs)))
				}
			}()
		}
		wg.Wait()
		drained += time.Since(start)
	}
	b.ReportMetric(float64(benchJobs*b.N)/drained.Seconds(), "jobs/s")
}

var (
	scaleGroups = flag.Int("groups.n", 100000, "backlogged groups for BenchmarkClaimGroupsAtScale")
	scaleFree   = flag.Int("groups.free", 100, "of them, groups left free (the rest are running a job)")
	scaleJobs   = flag.Int("groups.jobs", 3, "pending jobs per group")
	scaleLimit  = flag.Int("groups.limit", 1000, "claim limit")
)

// BenchmarkClaimGroupsAtScale is storetest.BenchClaimGroupsAtScale on
// SQLite.
//
//	go test -run '^$' -bench ClaimGroupsAtScale -benchtime 50x ./sqlite/
func BenchmarkClaimGroupsAtScale(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchClaimGroupsAtScale(b, s, storetest.GroupsAtScale{
		Groups: *scaleGroups, JobsPerGroup: *scaleJobs, Free: *scaleFree, Limit: *scaleLimit,
	})
}

// BenchmarkEnqueueUnique: enqueue cost with and without unique keys, one
// job and batches of 100 (storetest.BenchEnqueueUnique).
//
//	go test -run '^$' -bench EnqueueUnique -benchtime 2000x ./sqlite/
func BenchmarkEnqueueUnique(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprint("batch-", size), func(b *testing.B) {
			storetest.BenchEnqueueUnique(b, openTemp(b), size)
		})
	}
}

// BenchmarkFinish: storetest.BenchFinish.
//
//	go test -run '^$' -bench Finish -benchtime 3x ./sqlite/
func BenchmarkFinish(b *testing.B) { storetest.BenchFinish(b, openTemp(b)) }

// BenchmarkKeys: storetest.BenchKeys.
//
//	go test -run '^$' -bench Keys -benchtime 5x ./sqlite/
func BenchmarkKeys(b *testing.B) { storetest.BenchKeys(b, openTemp(b)) }
