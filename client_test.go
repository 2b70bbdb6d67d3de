package readpast_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newPGStore(t testing.TB) *postgres.Store {
	t.Helper()
	s, _ := newPGStoreURL(t)
	return s
}

// newPGStoreURL opens a migrated PostgreSQL store on a new database,
// closed when the test ends, and returns it with the database's URL.
func newPGStoreURL(t testing.TB) (*postgres.Store, string) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.URL(t)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// newSQLiteStore opens a SQLite store in a new file, closed when the test ends.
func newSQLiteStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func startClient(t *testing.T, s readpast.Store, cfg readpast.Config) *readpast.Client {
	t.Helper()
	c, err := readpast.NewClient(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Stop(ctx)
	})
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stateOf(t *testing.T, s readpast.Store, id int64) *readpast.Job {
	t.Helper()
	j, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestClientWorksEveryJobOnce(t *testing.T) {
	s := newPGStore(t)
	const n = 3000
	var mu sync.Mutex
	runs := map[int64]int{}
	w := readpast.NewWorkers()
	type addArgs struct{ A, B int }
	readpast.HandleTyped(w, "add", func(ctx context.Context, job *readpast.Job, args addArgs) (any, error) {
		mu.Lock()
		runs[job.ID]++
		mu.Unlock()
		return map[string]int{"sum": args.A + args.B}, nil
	}, nil)
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "add", Payload: json.RawMessage(fmt.Sprintf(`{"A":%d,"B":1}`, i)), Queue: []string{"q1", "q2"}[i%2]}
	}
	c := startClient(t, s, readpast.Config{
		Workers: w,
		Queues:  map[string]readpast.QueueConfig{"q1": {MaxWorkers: 20}, "q2": {MaxWorkers: 5, FetchLimit: 3}},
	})
	jobs, err := c.Enqueue(context.Background(), ps...)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "all jobs to succeed", func() bool {
		st, err := s.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ok int64
		for _, x := range st {
			if x.State == readpast.StateSucceeded {
				ok += x.Count
			}
		}
		return ok == n
	})
	mu.Lock()
	defer mu.Unlock()
	for _, j := range jobs {
		if runs[j.ID] != 1 {
			t.Fatalf("job %d ran %d times", j.ID, runs[j.ID])
		}
	}
	j := stateOf(t, s, jobs[7].ID)
	if string(j.Result) != `{"sum": 8}` || j.Worker != c.WorkerID() {
		t.Fatalf("result %s by %q", j.Result, j.Worker)
	}
}

func TestClientRetriesPanicsAndPermanentErrors(t *testing.T) {
	s := newPGStore(t)
	var flakyRuns atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("flaky", func(ctx context.Context, job *readpast.Job) (any, error) {
		if flakyRuns.Add(1) < 3 {
			return nil, errors.New("try again")
		}
		return "done", nil
	}, &readpast.HandlerOptions{RetryPolicy: func(int) time.Duration { return 50 * time.Millisecond }})
	w.Handle("panics", func(ctx context.Context, job *readpast.Job) (any, error) {
		panic("kaboom")
	}, nil)
	w.Handle("fatal", func(ctx context.Context, job *readpast.Job) (any, error) {
		return nil, readpast.Permanent(errors.New("bad input"))
	}, nil)
	type args struct{ N int }
	readpast.HandleTyped(w, "typed", func(ctx context.Context, job *readpast.Job, a args) (any, error) { return a.N, nil }, nil)
	c := startClient(t, s, readpast.Config{Workers: w, PollInterval: 20 * time.Millisecond})
	jobs, err := c.Enqueue(context.Background(),
		readpast.EnqueueParams{Kind: "flaky", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "panics", MaxAttempts: 1},
		readpast.EnqueueParams{Kind: "fatal", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "typed", Payload: json.RawMessage(`{"N":"not a number"}`)},
		readpast.EnqueueParams{Kind: "nobody-handles-this", MaxAttempts: 1},
	)
	if err != nil {
		t.Fatal(err)
	}
	final := func(id int64) func() bool {
		return func() bool { return stateOf(t, s, id).State.Final() }
	}
	for _, j := range jobs {
		waitFor(t, 10*time.Second, fmt.Sprintf("job %d (%s) to finish", j.ID, j.Kind), final(j.ID))
	}
	flaky := stateOf(t, s, jobs[0].ID)
	if flaky.State != readpast.StateSucceeded || flaky.Attempt != 3 || len(flaky.Errors) != 2 || flaky.Errors[0].Message != "try again" {
		t.Fatalf("flaky: %+v", flaky)
	}
	p := stateOf(t, s, jobs[1].ID)
	if p.State != readpast.StateFailed || len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, "kaboom") || !strings.Contains(p.Errors[0].Stack, "client_test.go") {
		t.Fatalf("panic not recorded with its stack: %+v", p.Errors)
	}
	for _, j := range jobs[2:] {
		if f := stateOf(t, s, j.ID); f.State != readpast.StateFailed || f.Attempt != 1 {
			t.Fatalf("%s: want failed for good after one attempt, got %s after %d", j.Kind, f.State, f.Attempt)
		}
	}
}

func TestClientHeartbeatsLongJobs(t *testing.T) {
	s := newPGStore(t)
	w := readpast.NewWorkers()
	w.Handle("slow", func(ctx context.Context, job *readpast.Job) (any, error) {
		select {
		case <-time.After(5 * time.Second): // two and a half leases
			return nil, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}, nil)
	// A lease of 2 s, renewed every third of it: a heartbeat may come
	// more than a second late on a loaded machine without losing the job,
	// and a client that renewed nothing would lose it at 2 s.
	c := startClient(t, s, readpast.Config{Workers: w, Lease: 2 * time.Second, RescueInterval: 50 * time.Millisecond})
	jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "slow job to finish", func() bool { return stateOf(t, s, jobs[0].ID).State.Final() })
	if j := stateOf(t, s, jobs[0].ID); j.State != readpast.StateSucceeded || j.Attempt != 1 {
		t.Fatalf("heartbeated job: %s after %d attempts, errors %+v", j.State, j.Attempt, j.Errors)
	}
}

func TestClientCancelsHandlerWhenLeaseLost(t *testing.T) {
	s := newPGStore(t)
	started := make(chan int64, 1)
	cause := make(chan error, 1)
	w := readpast.NewWorkers()
	w.Handle("victim", func(ctx context.Context, job *readpast.Job) (any, error) {
		started <- job.ID
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}, nil)
	c := startClient(t, s, readpast.Config{Workers: w, Lease: 300 * time.Millisecond})
	if _, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "victim"}); err != nil {
		t.Fatal(err)
	}
	id := <-started
	if _, err := s.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, readpast.ErrLeaseLost) {
			t.Fatalf("handler ctx cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("handler kept running after its claim was cancelled")
	}
	if j := stateOf(t, s, id); j.State != readpast.StateCancelled {
		t.Fatalf("state %s", j.State)
	}
}

func TestClientGracefulStopReleasesUnfinished(t *testing.T) {
	s := newPGStore(t)
	started := make(chan struct{}, 10)
	w := readpast.NewWorkers()
	w.Handle("quick", func(ctx context.Context, job *readpast.Job) (any, error) {
		time.Sleep(100 * time.Millisecond)
		return nil, nil
	}, nil)
	w.Handle("stuck", func(ctx context.Context, job *readpast.Job) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "quick"}, readpast.EnqueueParams{Kind: "stuck"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop: %v, want the deadline error", err)
	}
	if j := stateOf(t, s, jobs[0].ID); j.State != readpast.StateSucceeded {
		t.Fatalf("quick job was not allowed to finish: %s", j.State)
	}
	if j := stateOf(t, s, jobs[1].ID); j.State != readpast.StatePending || j.Attempt != 0 {
		t.Fatalf("stuck job not released: %s attempt %d", j.State, j.Attempt)
	}
	if _, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "quick"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if st, _ := s.Claim(context.Background(), readpast.ClaimParams{Worker: "x", Limit: 10, Lease: time.Second}); len(st) != 2 {
		t.Fatalf("a stopped client kept claiming: %d jobs left", len(st))
	}
}

func TestClientWakesOnEnqueue(t *testing.T) {
	s := newPGStore(t)
	ran := make(chan time.Time, 1)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		ran <- time.Now()
		return nil, nil
	}, nil)
	// Polling alone would take a minute: only a wake-up explains a fast start.
	startClient(t, s, readpast.Config{Workers: w, PollInterval: time.Minute})
	waitListening(t, s)
	// Enqueue through a second store on the same database, as another process would.
	other, err := postgres.Open(context.Background(), s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	enq := time.Now()
	if _, err := other.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-ran:
		t.Logf("enqueue to start: %v", at.Sub(enq))
	case <-time.After(5 * time.Second):
		t.Fatal("worker not woken by an enqueue in another process")
	}
}

// waitListening waits until a LISTEN connection is open on s's database.
func waitListening(t *testing.T, s *postgres.Store) {
	t.Helper()
	waitFor(t, 10*time.Second, "the listener", func() bool {
		var n int
		err := s.Pool().QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN readpast' AND datname = current_database()").Scan(&n)
		return err == nil && n > 0
	})
}

// TestClientStopCompletesWorkFinishedDuringShutdown: a handler that
// returns success after Stop cancelled it has done the work; the job is
// completed, not released to run again.
func TestClientStopCompletesWorkFinishedDuringShutdown(t *testing.T) {
	s := newPGStore(t)
	started := make(chan struct{})
	w := readpast.NewWorkers()
	w.Handle("finishes-anyway", func(ctx context.Context, job *readpast.Job) (any, error) {
		close(started)
		<-ctx.Done()
		return "done", nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "finishes-anyway"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c.Stop(ctx)
	if j := stateOf(t, s, jobs[0].ID); j.State != readpast.StateSucceeded || string(j.Result) != `"done"` {
		t.Fatalf("job finished during shutdown: %s %s", j.State, j.Result)
	}
}

// TestClientStopDoesNotHangOnStubbornHandler: Stop returns even when a
// handler ignores its context; the job is left to lease expiry.
func TestClientStopDoesNotHangOnStubbornHandler(t *testing.T) {
	s := newPGStore(t)
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	w := readpast.NewWorkers()
	w.Handle("stubborn", func(ctx context.Context, job *readpast.Job) (any, error) {
		close(started)
		<-release // ignores ctx
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "stubborn"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	returned := make(chan error, 1)
	go func() { returned <- c.Stop(ctx) }()
	select {
	case err := <-returned:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Stop hung on a handler that ignores its context")
	}
}

func TestNewClientRejectsBadConfig(t *testing.T) {
	s := newPGStore(t)
	for _, cfg := range []readpast.Config{
		{Lease: time.Millisecond},
		{Queues: map[string]readpast.QueueConfig{"bad name": {}}},
		{Queues: map[string]readpast.QueueConfig{"q": {MaxWorkers: -1}}},
		{PollInterval: -time.Second},
	} {
		if _, err := readpast.NewClient(s, cfg); !errors.Is(err, readpast.ErrInvalid) {
			t.Fatalf("config %+v: %v", cfg, err)
		}
	}
	c, err := readpast.NewClient(s, readpast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("start without workers: %v", err)
	}
}

func TestRetentionDeletesOldFinishedJobsByState(t *testing.T) {
	s := newPGStore(t)
	ctx := context.Background()
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a"}, {Kind: "b"}, {Kind: "c"}, {Kind: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 3, Lease: time.Minute})
	if err != nil || len(claimed) != 3 {
		t.Fatal(claimed, err)
	}
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: claimed[0].ID, Token: claimed[0].Token}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, []readpast.Failure{{ID: claimed[1].ID, Token: claimed[1].Token, Message: "x", Discard: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, claimed[2].ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	// Keep failed jobs, delete the other finished ones; live jobs are never touched.
	n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Millisecond, Cancelled: time.Millisecond})
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	for i, want := range []error{readpast.ErrNotFound, nil, readpast.ErrNotFound, nil} {
		if _, err := s.Get(ctx, jobs[i].ID); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("job %d (%s): %v, want %v", jobs[i].ID, jobs[i].Kind, err, want)
		}
	}
	if n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Hour, Failed: time.Hour}); err != nil || n != 0 {
		t.Fatalf("pruned %d jobs younger than the retention: %v", n, err)
	}
}

// stallingStore delays or fails its first Complete calls.
type stallingStore struct {
	readpast.Store
	delay      time.Duration // the first call sleeps this long
	failFor    time.Duration // calls fail until this long after the first
	calls      atomic.Int32
	firstCall  atomic.Int64 // unix nanoseconds
	refusedErr error
}

func (s *stallingStore) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	n := s.calls.Add(1)
	if n == 1 {
		s.firstCall.Store(time.Now().UnixNano())
		time.Sleep(s.delay)
	}
	if time.Since(time.Unix(0, s.firstCall.Load())) < s.failFor {
		return nil, s.refusedErr
	}
	return s.Store.Complete(ctx, cs)
}

// TestClientKeepsLeaseUntilCompletionIsWritten: a job whose handler has
// returned is still held until its completion is written. Before the fix
// its heartbeat stopped when the handler returned, so a completion that
// waited longer than the lease (a slow completer, a short outage) let the
// lease expire and the job ran again; the completer also gave up after
// about a second of retries.
func TestClientKeepsLeaseUntilCompletionIsWritten(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(readpast.Store) *stallingStore
	}{
		{"slow completer", func(s readpast.Store) *stallingStore {
			return &stallingStore{Store: s, delay: 1500 * time.Millisecond}
		}},
		{"database away for 2s", func(s readpast.Store) *stallingStore {
			return &stallingStore{Store: s, failFor: 2 * time.Second, refusedErr: errors.New("connection refused")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := newPGStore(t)
			s := tc.store(pg)
			var runs atomic.Int32
			w := readpast.NewWorkers()
			w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
				runs.Add(1)
				return nil, nil
			}, nil)
			lease := 300 * time.Millisecond
			if tc.name != "slow completer" {
				lease = 3 * time.Second
			}
			startClient(t, s, readpast.Config{Workers: w, Lease: lease, PollInterval: 10 * time.Millisecond, RescueInterval: 20 * time.Millisecond})
			jobs, err := pg.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k"}})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "the job to succeed", func() bool {
				return stateOf(t, pg, jobs[0].ID).State == readpast.StateSucceeded
			})
			j := stateOf(t, pg, jobs[0].ID)
			if runs.Load() != 1 || j.Attempt != 1 || len(j.Errors) != 0 {
				t.Fatalf("the handler ran %d times; attempt %d, errors %+v: the lease expired while the completion waited", runs.Load(), j.Attempt, j.Errors)
			}
		})
	}
}

// TestClientSchedules: schedules declared in Config are put in the store at
// Start, and the client's scheduler makes their jobs, which its workers
// run; a second start with the same declaration keeps the next tick.
func TestClientSchedules(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	ran := 0
	w := readpast.NewWorkers()
	w.Handle("tick", func(ctx context.Context, job *readpast.Job) (any, error) {
		mu.Lock()
		ran++
		mu.Unlock()
		return nil, nil
	}, nil)
	decl := []readpast.ScheduleParams{{Name: "beat", Cron: "@every 1s", Job: readpast.EnqueueParams{Kind: "tick"}}}
	c, err := readpast.NewClient(s, readpast.Config{Workers: w, Schedules: decl, ScheduleInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "two ticks run", func() bool { mu.Lock(); defer mu.Unlock(); return ran >= 2 })
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := s.GetSchedule(ctx, "beat")
	if err != nil || before.LastJobID == nil {
		t.Fatalf("%+v %v", before, err)
	}
	// Declaring it again, as a restart does, keeps its next tick.
	if err := readpast.SyncSchedules(ctx, s, decl); err != nil {
		t.Fatal(err)
	}
	after, err := s.GetSchedule(ctx, "beat")
	if err != nil || !after.NextRunAt.Equal(*before.NextRunAt) {
		t.Fatalf("next tick %v after a sync, was %v (%v)", after.NextRunAt, before.NextRunAt, err)
	}
	// Bad declarations are refused by NewClient, naming the schedule.
	for _, bad := range [][]readpast.ScheduleParams{
		{{Name: "x", Cron: "nope", Job: readpast.EnqueueParams{Kind: "k"}}},
		{decl[0], decl[0]},
	} {
		if _, err := readpast.NewClient(s, readpast.Config{Workers: w, Schedules: bad}); !errors.Is(err, readpast.ErrInvalid) || !strings.Contains(err.Error(), "Schedules[") {
			t.Errorf("NewClient with %+v: %v", bad, err)
		}
	}
}

// TestClientStopWithAnEndedContext: a Stop whose ctx has already ended
// reports no error when no handler had to be cancelled (a `defer
// c.Stop(ctx)` with a signal's ctx), and a stopped client refuses to
// start again, saying so.
func TestClientStopWithAnEndedContext(t *testing.T) {
	s := newSQLiteStore(t)
	w := readpast.NewWorkers()
	ran := make(chan struct{}, 1)
	w.Handle("k", func(ctx context.Context, job *readpast.Job) (any, error) {
		ran <- struct{}{}
		return nil, nil
	}, nil)
	for range 5 {
		c, err := readpast.NewClient(s, readpast.Config{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		jobs, err := c.Enqueue(context.Background(), readpast.EnqueueParams{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		<-ran
		// The handler has returned once its completion is written; give
		// its goroutine a moment more to count itself out.
		waitFor(t, 30*time.Second, "the completion", func() bool {
			j, err := s.Get(context.Background(), jobs[0].ID)
			return err == nil && j.State == readpast.StateSucceeded
		})
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := c.Stop(ctx); err != nil {
			t.Fatalf("Stop with an ended ctx and no running handler: %v", err)
		}
		if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("Start after Stop: %v, want an error saying the client stopped", err)
		}
	}
}

// TestClientNegativeRetryWaitRetriesAtOnce: a retry policy whose wait
// overflowed to a negative duration retries at once and keeps the
// attempt's error. Added as it was, the wait put the retry before 1970,
// the store refused the failure, and the job sat out its lease with its
// error lost.
func TestClientNegativeRetryWaitRetriesAtOnce(t *testing.T) {
	s := newSQLiteStore(t)
	overflowed := func(int) time.Duration { return time.Duration(math.MinInt64) }
	var runs atomic.Int32
	w := readpast.NewWorkers()
	w.Handle("flaky", func(ctx context.Context, job *readpast.Job) (any, error) {
		if runs.Add(1) == 1 {
			return nil, errors.New("boom")
		}
		return nil, nil
	}, &readpast.HandlerOptions{RetryPolicy: overflowed})
	c := startClient(t, s, readpast.Config{Workers: w, Lease: time.Hour, PollInterval: 20 * time.Millisecond, RetryPolicy: overflowed})
	jobs, err := c.Enqueue(context.Background(),
		readpast.EnqueueParams{Kind: "flaky", MaxAttempts: 3},
		readpast.EnqueueParams{Kind: "unhandled", MaxAttempts: 2},
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		waitFor(t, 10*time.Second, fmt.Sprintf("job %d (%s) to finish", j.ID, j.Kind), func() bool { return stateOf(t, s, j.ID).State.Final() })
	}
	if j := stateOf(t, s, jobs[0].ID); j.State != readpast.StateSucceeded || j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Message != "boom" {
		t.Fatalf("flaky: %s after %d attempts, errors %+v", j.State, j.Attempt, j.Errors)
	}
	if j := stateOf(t, s, jobs[1].ID); j.State != readpast.StateFailed || j.Attempt != 2 || len(j.Errors) != 2 {
		t.Fatalf("unhandled: %s after %d attempts, errors %+v", j.State, j.Attempt, j.Errors)
	}
}
