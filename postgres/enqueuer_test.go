package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// waitUntil fails t unless cond holds within five seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// statementLog records the enqueue statements a store runs (their sizes)
// and holds the first few until released.
type statementLog struct {
	mu    sync.Mutex
	sizes []int
	holds []chan struct{} // statement i waits for holds[i] to close, if set
}

func watchStatements(s *postgres.Store, held int) *statementLog {
	l := &statementLog{holds: make([]chan struct{}, held)}
	for i := range l.holds {
		l.holds[i] = make(chan struct{})
	}
	postgres.OnEnqueueStatement(s, func(jobs int) {
		l.mu.Lock()
		l.sizes = append(l.sizes, jobs)
		i := len(l.sizes) - 1
		l.mu.Unlock()
		if i < len(l.holds) {
			<-l.holds[i]
		}
	})
	return l
}

func (l *statementLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sizes)
}

func (l *statementLog) all() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes)
}

// release lets statements [from, to) go.
func (l *statementLog) release(from, to int) {
	for _, h := range l.holds[from:to] {
		close(h)
	}
}

// occupyWriters starts one single-job enqueue per writer of s and waits
// until each holds its statement (l holds the first EnqueueWriters). The
// returned group ends when those enqueues have returned.
func occupyWriters(t *testing.T, s *postgres.Store, l *statementLog) *sync.WaitGroup {
	t.Helper()
	wg := new(sync.WaitGroup)
	for range postgres.EnqueueWriters {
		wg.Go(func() {
			if _, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "first"}}); err != nil {
				t.Error(err)
			}
		})
	}
	waitUntil(t, "every writer holds a statement", func() bool { return l.count() == postgres.EnqueueWriters })
	return wg
}

// busyStore opens a store whose writers are both busy: l holds their
// statements, and the next heldAfter statements too, until released; held
// ends when the writers' own enqueues have returned.
func busyStore(t *testing.T, heldAfter int) (s *postgres.Store, l *statementLog, held *sync.WaitGroup) {
	t.Helper()
	s = newStore(t)
	t.Cleanup(func() { s.Close() })
	l = watchStatements(s, postgres.EnqueueWriters+heldAfter)
	return s, l, occupyWriters(t, s, l)
}

// callJobs are the jobs of test call i: i%3+1 of them, each naming the call
// and its place in it.
func callJobs(kind string, i int) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, i%3+1)
	for k := range ps {
		ps[k] = readpast.EnqueueParams{Kind: kind, Queue: fmt.Sprint("q", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"call": %d, "job": %d}`, i, k))}
	}
	return ps
}

// checkCallJobs checks that jobs are call i's, in its order, with
// ascending ids. It may run off the test's goroutine.
func checkCallJobs(t *testing.T, i int, jobs []*readpast.Job, want []readpast.EnqueueParams) {
	t.Helper()
	if len(jobs) != len(want) {
		t.Errorf("call %d got %d jobs back, want %d", i, len(jobs), len(want))
		return
	}
	for k, j := range jobs {
		var p struct{ Call, Job int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			t.Error(err)
			return
		}
		if j.Queue != want[k].Queue || p.Call != i || p.Job != k {
			t.Errorf("call %d, job %d: got queue %s, payload %s", i, k, j.Queue, j.Payload)
		}
		if k > 0 && j.ID <= jobs[k-1].ID {
			t.Errorf("call %d: ids %d then %d, want ascending", i, jobs[k-1].ID, j.ID)
		}
	}
}

// TestEnqueueCallsShareStatements: calls that come while every writer is
// busy wait, and the next statement carries all of them; each gets its own
// jobs back, and they committed in one transaction.
func TestEnqueueCallsShareStatements(t *testing.T) {
	ctx := context.Background()
	s, l, held := busyStore(t, 0)

	const calls = 10
	got := make([][]*readpast.Job, calls)
	want := 0
	var wg sync.WaitGroup
	for i := range calls {
		want += len(callJobs("k", i))
		wg.Go(func() {
			var err error
			if got[i], err = s.Enqueue(ctx, callJobs("k", i)); err != nil {
				t.Error(err)
			}
		})
	}
	waitUntil(t, "the calls wait", func() bool { return postgres.EnqueueWaiting(s) == calls })
	if n := l.count(); n != postgres.EnqueueWriters {
		t.Fatalf("%d statements ran while every writer was busy, want none more", n-postgres.EnqueueWriters)
	}
	l.release(0, postgres.EnqueueWriters)
	wg.Wait()
	held.Wait()
	if sizes := l.all()[postgres.EnqueueWriters:]; !slices.Equal(sizes, []int{want}) {
		t.Errorf("the waiting calls went in statements of %v jobs, want one of %d", sizes, want)
	}
	for i := range calls {
		checkCallJobs(t, i, got[i], callJobs("k", i))
	}
	var rows, txs int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*), count(DISTINCT xmin::text) FROM readpast_jobs WHERE kind = 'k'").Scan(&rows, &txs); err != nil {
		t.Fatal(err)
	}
	if rows != want || txs != 1 {
		t.Errorf("%d rows in %d transactions, want %d in one", rows, txs, want)
	}
}

// TestEnqueueSharedStatementBadJob: when a job makes the shared statement
// fail, nothing of it commits, each call is written again alone, and only
// the call with the bad job fails.
func TestEnqueueSharedStatementBadJob(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	// A job the server refuses though readpast's checks pass it.
	if _, err := s.Pool().Exec(ctx, "ALTER TABLE readpast_jobs ADD CONSTRAINT no_poison CHECK (kind <> 'poison')"); err != nil {
		t.Fatal(err)
	}
	l := watchStatements(s, postgres.EnqueueWriters)
	held := occupyWriters(t, s, l)

	const calls, bad = 5, 2
	jobs := make([][]readpast.EnqueueParams, calls)
	got := make([][]*readpast.Job, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	total, good := 0, 0
	for i := range calls {
		jobs[i] = callJobs("k", i)
		if i == bad {
			jobs[i] = append(jobs[i], readpast.EnqueueParams{Kind: "poison"})
		} else {
			good += len(jobs[i])
		}
		total += len(jobs[i])
		wg.Go(func() { got[i], errs[i] = s.Enqueue(ctx, jobs[i]) })
	}
	waitUntil(t, "the calls wait", func() bool { return postgres.EnqueueWaiting(s) == calls })
	l.release(0, postgres.EnqueueWriters)
	wg.Wait()
	held.Wait()
	for i := range calls {
		switch {
		case i == bad && (errs[i] == nil || errors.Is(errs[i], readpast.ErrUnavailable)):
			t.Errorf("the call with the bad job: %v, want the server's refusal", errs[i])
		case i != bad && errs[i] != nil:
			t.Errorf("call %d failed with the bad call: %v", i, errs[i])
		case i != bad:
			checkCallJobs(t, i, got[i], jobs[i])
		}
	}
	sizes := l.all()[postgres.EnqueueWriters:]
	if len(sizes) != calls+1 || sizes[0] != total {
		t.Errorf("statements of %v jobs, want one of %d and then one per call", sizes, total)
	}
	var rows int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_jobs WHERE kind = 'k'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != good {
		t.Errorf("%d rows of the calls, want %d: the good calls' only", rows, good)
	}
}

// TestEnqueueCancelledWhileWaiting: a call whose context ends before its
// statement begins returns at once, having written nothing.
func TestEnqueueCancelledWhileWaiting(t *testing.T) {
	s, l, held := busyStore(t, 0)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "cancelled"}})
		errc <- err
	}()
	waitUntil(t, "the call waits", func() bool { return postgres.EnqueueWaiting(s) == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Enqueue = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled call still waits for a writer")
	}
	if n := postgres.EnqueueWaiting(s); n != 0 {
		t.Errorf("%d calls still wait", n)
	}
	l.release(0, postgres.EnqueueWriters)
	held.Wait()
	if sizes := l.all(); len(sizes) != postgres.EnqueueWriters {
		t.Errorf("statements of %v jobs, want only the writers' own", sizes)
	}
	var rows int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM readpast_jobs WHERE kind = 'cancelled'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("the cancelled call's job was written")
	}
}

// TestEnqueueCancelledInSharedStatement: a call whose context ends while
// its jobs are in a shared statement waits for that statement's outcome,
// which the other call's context keeps going, and reports it: it never
// says it failed for jobs that committed.
func TestEnqueueCancelledInSharedStatement(t *testing.T) {
	s, l, held := busyStore(t, 1) // and the shared statement

	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		jobs []*readpast.Job
		err  error
	}
	cancelled, other := make(chan result, 1), make(chan result, 1)
	go func() {
		jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "cancelled"}})
		cancelled <- result{jobs, err}
	}()
	waitUntil(t, "the first call waits", func() bool { return postgres.EnqueueWaiting(s) == 1 })
	go func() {
		jobs, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "other"}})
		other <- result{jobs, err}
	}()
	waitUntil(t, "both calls wait", func() bool { return postgres.EnqueueWaiting(s) == 2 })
	l.release(0, postgres.EnqueueWriters)
	waitUntil(t, "the shared statement is held", func() bool { return l.count() == postgres.EnqueueWriters+1 })
	cancel()
	select {
	case r := <-cancelled:
		t.Fatalf("the cancelled call returned (%v) before its statement's outcome", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	l.release(postgres.EnqueueWriters, postgres.EnqueueWriters+1)
	for _, ch := range []chan result{cancelled, other} {
		r := <-ch
		if r.err != nil || len(r.jobs) != 1 {
			t.Errorf("Enqueue = %d jobs, %v; want the job, committed", len(r.jobs), r.err)
		}
	}
	held.Wait()
	if sizes := l.all(); len(sizes) != postgres.EnqueueWriters+1 || sizes[postgres.EnqueueWriters] != 2 {
		t.Errorf("statements of %v jobs, want the two calls in one", sizes)
	}
}

// TestEnqueueSharedStatementDeadline: a shared statement has the latest
// of its calls' deadlines when every one has a deadline, and none when
// one has none; a lone call's statement has its own context.
func TestEnqueueSharedStatementDeadline(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	var mu sync.Mutex
	var deadlines []time.Duration // from each statement's start; -1: none
	l := watchStatements(s, postgres.EnqueueWriters)
	postgres.OnEnqueueContext(s, func(ctx context.Context) {
		d, ok := ctx.Deadline()
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			deadlines = append(deadlines, -1)
			return
		}
		deadlines = append(deadlines, time.Until(d).Round(time.Minute))
	})
	held := occupyWriters(t, s, l) // two lone calls without deadlines

	enqueueWithin := func(wg *sync.WaitGroup, d time.Duration) {
		wg.Go(func() {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if d > 0 {
				ctx, cancel = context.WithTimeout(ctx, d)
			}
			defer cancel()
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
				t.Error(err)
			}
		})
	}
	var wg sync.WaitGroup
	enqueueWithin(&wg, 10*time.Minute)
	enqueueWithin(&wg, 30*time.Minute)
	waitUntil(t, "the calls wait", func() bool { return postgres.EnqueueWaiting(s) == 2 })
	l.release(0, postgres.EnqueueWriters)
	wg.Wait()
	held.Wait()
	// Then a shared statement of a call with a deadline and one without.
	l2 := watchStatements(s, postgres.EnqueueWriters)
	held = occupyWriters(t, s, l2)
	enqueueWithin(&wg, 10*time.Minute)
	enqueueWithin(&wg, 0)
	waitUntil(t, "the calls wait", func() bool { return postgres.EnqueueWaiting(s) == 2 })
	l2.release(0, postgres.EnqueueWriters)
	wg.Wait()
	held.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{-1, -1, 30 * time.Minute, -1, -1, -1}
	if !slices.Equal(deadlines, want) {
		t.Errorf("statement deadlines %v, want %v", deadlines, want)
	}
}

// lateContext reports a deadline but ends only when told: a context whose
// timer fires later than another's of the same deadline.
type lateContext struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func (c *lateContext) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *lateContext) Done() <-chan struct{}       { return c.done }
func (c *lateContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestEnqueueSharedDeadlineEndsCallersFirst: a shared statement that fails
// at its deadline reports the failure to a call only once that call's own
// context has ended, as a statement run on that context would.
func TestEnqueueSharedDeadlineEndsCallersFirst(t *testing.T) {
	s, l, held := busyStore(t, 0)

	late := &lateContext{Context: context.Background(), deadline: time.Now().Add(100 * time.Millisecond), done: make(chan struct{})}
	type result struct {
		err  error
		live bool // the call's context had not ended when it returned
	}
	results := make(chan result, 2)
	for _, ctx := range []context.Context{late, late} {
		go func() {
			_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}})
			results <- result{err, ctx.Err() == nil}
		}()
	}
	waitUntil(t, "the calls wait", func() bool { return postgres.EnqueueWaiting(s) == 2 })
	time.Sleep(time.Until(late.deadline) + 50*time.Millisecond) // the shared statement's deadline passes
	l.release(0, postgres.EnqueueWriters)
	select {
	case r := <-results:
		t.Fatalf("a call returned (%v) while its context was live", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	close(late.done)
	for range 2 {
		r := <-results
		if r.err == nil || r.live {
			t.Errorf("Enqueue = %v with its context live: %v; want the deadline's error after the context ended", r.err, r.live)
		}
	}
	held.Wait()
}

// TestEnqueueConcurrentCallsKeepTheirJobs: many goroutines enqueue at
// once; every call gets back exactly its own jobs, in its order, every job
// is stored once, and statements were shared.
func TestEnqueueConcurrentCallsKeepTheirJobs(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	l := watchStatements(s, 0)
	const goroutines, calls = 16, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[int64]bool{}
	total := 0
	for g := range goroutines {
		wg.Go(func() {
			for c := range calls {
				i := g*calls + c
				want := callJobs("k", i)
				jobs, err := s.Enqueue(ctx, want)
				if err != nil {
					t.Error(err)
					return
				}
				checkCallJobs(t, i, jobs, want)
				mu.Lock()
				total += len(want)
				for _, j := range jobs {
					if ids[j.ID] {
						t.Errorf("job %d returned twice", j.ID)
					}
					ids[j.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var rows, payloads int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*), count(DISTINCT payload) FROM readpast_jobs").Scan(&rows, &payloads); err != nil {
		t.Fatal(err)
	}
	if rows != total || payloads != total {
		t.Errorf("%d rows with %d distinct payloads, want %d", rows, payloads, total)
	}
	if n := l.count(); n >= goroutines*calls {
		t.Errorf("%d statements for %d calls: none shared", n, goroutines*calls)
	} else {
		t.Logf("%d calls in %d statements", goroutines*calls, n)
	}
}
