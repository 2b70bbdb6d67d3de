package readpast_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

var (
	benchJobs       = flag.Int("drain.jobs", 100000, "jobs pre-inserted for BenchmarkDrain")
	benchMaxWorkers = flag.Int("drain.workers", 1000, "MaxWorkers for BenchmarkDrain")
	benchFetch      = flag.Int("drain.fetch", 1000, "FetchLimit for BenchmarkDrain")
	benchProducers  = flag.Int("drain.clients", 2, "clients (each with its own producer) draining at once")
)

// benchPG is a durable PostgreSQL (fsync and synchronous_commit on) for
// benchmarks, unless READPAST_DATABASE_URL points elsewhere.
func benchPG(b *testing.B) *postgres.Store {
	ctx := context.Background()
	url := ""
	if os.Getenv("READPAST_DATABASE_URL") != "" {
		url = pgtest.URL(b)
	} else {
		srv, err := pgtest.Start(ctx, pgtest.Options{Durable: true})
		if err != nil {
			b.Skip(err)
		}
		b.Cleanup(func() { srv.Stop() })
		if url, err = srv.CreateDatabase(ctx); err != nil {
			b.Fatal(err)
		}
	}
	s, err := postgres.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDrain pre-inserts -drain.jobs jobs and measures how fast
// clients with no-op handlers drain them, from start until every
// completion is written. Reports jobs/s.
//
//	go test -run '^$' -bench Drain -benchtime 3x .
func BenchmarkDrain(b *testing.B) {
	b.Run("postgres", func(b *testing.B) { benchDrain(b, benchPG(b)) })
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		benchDrain(b, s)
	})
}

func benchDrain(b *testing.B, s readpast.Store) {
	ctx := context.Background()
	n := *benchJobs
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "noop"}
	}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < n; i += 5000 {
			if _, err := s.Enqueue(ctx, ps[i:min(i+5000, n)]); err != nil {
				b.Fatal(err)
			}
		}
		var ran atomic.Int64
		done := make(chan struct{})
		w := readpast.NewWorkers()
		w.Handle("noop", func(ctx context.Context, job *readpast.Job) (any, error) {
			if ran.Add(1) == int64(n) {
				close(done)
			}
			return nil, nil
		}, nil)
		clients := make([]*readpast.Client, *benchProducers)
		for i := range clients {
			c, err := readpast.NewClient(s, readpast.Config{
				Workers: w,
				Queues:  map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: *benchMaxWorkers, FetchLimit: *benchFetch}},
			})
			if err != nil {
				b.Fatal(err)
			}
			clients[i] = c
		}
		b.StartTimer()
		start := time.Now()
		for _, c := range clients {
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
		}
		<-done
		for _, c := range clients {
			if err := c.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
		b.StopTimer()
		left, err := s.Claim(ctx, readpast.ClaimParams{Worker: "check", Limit: 1, Lease: time.Second})
		if err != nil || len(left) != 0 {
			b.Fatalf("jobs left after the drain: %v %v", left, err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "jobs/s")
}
