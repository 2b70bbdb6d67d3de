package readpast_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

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
	benchTrace      = flag.Bool("drain.trace", false, "BenchmarkDrain with tracing on: every span sampled and exported through a batch processor to an exporter that drops them")
	benchKeys       = flag.Int("drain.keys", 0, "BenchmarkDrain: jobs name one of this many keys (k:0, k:1, ...; a limit that never binds), 0 for none")
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
// completion is written. Reports jobs/s. With -drain.trace, the jobs are
// enqueued in a trace, and every span is sampled and exported (to
// nowhere, through a batch processor).
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
		if *benchKeys > 0 {
			ps[i].Keys = []string{fmt.Sprint("k:", i%*benchKeys)}
		}
	}
	if *benchKeys > 0 {
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "k:*", Concurrency: readpast.MaxConcurrency}); err != nil {
			b.Fatal(err)
		}
	}
	var tp *sdktrace.TracerProvider
	insert := s.Enqueue
	if *benchTrace {
		tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(dropExporter{}))
		defer tp.Shutdown(ctx)
		// Jobs enqueued in a trace, as a traced producer's are: each
		// attempt reads its job's creation context, and its span is a
		// child of it and linked to it.
		tr, err := readpast.NewTracing(tp, nil)
		if err != nil {
			b.Fatal(err)
		}
		insert = func(ctx context.Context, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
			return tr.Enqueue(ctx, jobs, s.Enqueue)
		}
	}
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < n; i += 5000 {
			if _, err := insert(ctx, ps[i:min(i+5000, n)]); err != nil {
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
			cfg := readpast.Config{
				Workers: w,
				Queues:  map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: *benchMaxWorkers, FetchLimit: *benchFetch}},
			}
			if tp != nil {
				cfg.TracerProvider = tp
			}
			c, err := readpast.NewClient(s, cfg)
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

// memStoreTrip is how long each of memStore's claims and completions
// takes, as a round trip to a database would: claims and completions then
// come in batches of the sizes a drain has.
const memStoreTrip = 2 * time.Millisecond

// memStore hands out n made-up jobs and takes their completions, with no
// database behind it: BenchmarkClientOverhead measures the client alone.
type memStore struct {
	readpast.Store
	jobs      []readpast.Job // the jobs, claimed in turn
	done      chan struct{}  // closed when every job is completed
	completed atomic.Int64

	mu      sync.Mutex
	claimed int // protected by mu
}

func (s *memStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	time.Sleep(memStoreTrip)
	s.mu.Lock()
	from := s.claimed
	s.claimed = min(s.claimed+p.Limit, len(s.jobs))
	to := s.claimed
	s.mu.Unlock()
	out := make([]*readpast.Job, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, &s.jobs[i])
	}
	return out, nil
}

func (s *memStore) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	time.Sleep(memStoreTrip)
	if s.completed.Add(int64(len(cs))) == int64(len(s.jobs)) {
		close(s.done)
	}
	return make([]error, len(cs)), nil
}

// BenchmarkClientOverhead runs -drain.jobs no-op jobs through a Client
// whose store answers from memory after a round trip's wait: the client's
// own CPU time (cpu-ns/job, user and system, of the whole process) and
// allocations per job (claiming, starting, running, completing), which in
// a drain share the machine with PostgreSQL.
//
//	go test -run '^$' -bench ClientOverhead -benchmem .
func BenchmarkClientOverhead(b *testing.B) {
	ctx := context.Background()
	n := *benchJobs
	now := time.Now()
	jobs := make([]readpast.Job, n)
	for i := range jobs {
		lease := now.Add(time.Minute)
		jobs[i] = readpast.Job{ID: int64(i + 1), Queue: readpast.DefaultQueue, Kind: "noop", Payload: []byte("{}"),
			State: readpast.StateRunning, Attempt: 1, MaxAttempts: 25, RunAt: now, Token: "00000000-0000-4000-8000-000000000000",
			LeaseExpiresAt: &lease, Worker: "bench", CreatedAt: now, StartedAt: &now, Errors: []readpast.AttemptError{}, Tags: []string{}}
	}
	w := readpast.NewWorkers()
	w.Handle("noop", func(ctx context.Context, job *readpast.Job) (any, error) { return nil, nil }, nil)
	cpu := processCPU(b)
	for b.Loop() {
		s := &memStore{jobs: jobs, done: make(chan struct{})}
		c, err := readpast.NewClient(s, readpast.Config{
			Workers:          w,
			Queues:           map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: *benchMaxWorkers, FetchLimit: *benchFetch}},
			RescueInterval:   -1,
			ScheduleInterval: -1,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		<-s.done
		if err := c.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(n*b.N), "cpu-ns/job")
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// processCPU is the CPU time this process has used so far, user and
// system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
