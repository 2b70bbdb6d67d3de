// Package benchkit holds the benchmark scenarios of `readpast bench` and of
// the side-by-side module in bench/. Each scenario runs against a System:
// a job queue behind a small interface (readpast on PostgreSQL or SQLite in
// this module; River in the bench module), so the same code measures both.
//
// Jobs carry nothing; a handler sleeps for the scenario's job time, then
// reports when the job was enqueued (the system's own created-at) and when
// it started, which gives throughput over time and enqueue-to-start
// latency.
package benchkit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// System is a job queue under test.
type System interface {
	// Name identifies the system in reports.
	Name() string
	// Reset deletes every job, live and finished.
	Reset(ctx context.Context) error
	// Enqueue inserts n jobs, due now, in one call.
	Enqueue(ctx context.Context, n int) error
	// Start runs workers: at most workers jobs at once, fetching in
	// batches of up to fetch (0: the system's default). Each job takes
	// jobTime, then calls done with its enqueue and start times. stop ends
	// the workers once the jobs in flight are finished and recorded.
	Start(ctx context.Context, workers, fetch int, jobTime time.Duration, done func(enqueued, started time.Time)) (stop func(context.Context) error, err error)
	// Backlog inserts n jobs that no worker of Start takes (due in a
	// year), in batches.
	Backlog(ctx context.Context, n int) error
	// History inserts n finished jobs, in batches.
	History(ctx context.Context, n int) error
	// Depth counts the jobs waiting to run, as a dashboard or the CLI
	// would.
	Depth(ctx context.Context) (int64, error)
}

// Snapshotter is implemented by systems on PostgreSQL: HoldSnapshot opens
// a session that stays idle in a transaction holding a snapshot (as a
// long report or a forgotten psql would), until release.
type Snapshotter interface {
	HoldSnapshot(ctx context.Context) (release func(), err error)
}

// Analyzer is implemented by systems whose database keeps planner
// statistics. drain calls it after inserting its jobs, as autovacuum would
// within a minute of a bulk insert: the drain then runs on plans made for
// the tables' real size (with the statistics of the empty tables from
// Reset, the planner took a 500,000-job backlog for none).
type Analyzer interface {
	Analyze(ctx context.Context) error
}

// BulkInserter is implemented by systems with a second way to insert many
// jobs at once, faster than their Enqueue and returning less (River's
// InsertManyFast, which uses COPY and returns a count, where InsertMany
// returns the rows). The insert scenarios use it: each system inserts its
// fastest way. readpast has one way (Store.Enqueue writes large batches
// with COPY and still returns the jobs).
type BulkInserter interface {
	// InsertMany inserts n jobs, due now, in one call.
	InsertMany(ctx context.Context, n int) error
}

// Grouper is implemented by systems with concurrency groups.
type Grouper interface {
	// EnqueueGrouped inserts n jobs of group g (limit 1) in one call.
	EnqueueGrouped(ctx context.Context, g string, n int) error
}

// Pauser is implemented by systems that can pause a queue.
type Pauser interface {
	// PausedQueues creates n other queues, each holding jobs waiting jobs,
	// and pauses them.
	PausedQueues(ctx context.Context, n, jobs int) error
}

// ErrNotApplicable: the scenario needs something the system lacks.
var ErrNotApplicable = errors.New("benchkit: scenario does not apply to this system")

// Point is one second of a run.
type Point struct {
	// At is seconds since the run started.
	At float64 `json:"at"`
	// Done is how many jobs finished in that second.
	Done int64 `json:"done"`
}

// Result is one scenario's outcome on one system.
type Result struct {
	Scenario string  `json:"scenario"`
	System   string  `json:"system"`
	Jobs     int64   `json:"jobs"`
	Seconds  float64 `json:"seconds"`
	// PerSec is what the scenario measures per second: jobs completed (or
	// inserted, for insert).
	PerSec float64 `json:"per_sec"`
	// P50Ms and P99Ms are enqueue-to-start latencies, where measured.
	P50Ms float64 `json:"p50_ms,omitempty"`
	P99Ms float64 `json:"p99_ms,omitempty"`
	// Extra holds scenario-specific figures (a depth count's cost, a
	// flatness ratio).
	Extra map[string]float64 `json:"extra,omitempty"`
	// Series is throughput per second over the run.
	Series []Point `json:"series,omitempty"`
}

// Options sizes the scenarios.
type Options struct {
	// Scale multiplies job counts and durations (1 is the full
	// size; 0.1 is a quick look).
	Scale float64
	// Progress, if set, gets a line per second while a scenario runs.
	Progress io.Writer
	// Shortest is the least a timed scenario runs; 0 means one second.
	Shortest time.Duration
}

func (o Options) n(full int) int {
	return max(1, int(math.Round(float64(full)*o.scale())))
}

func (o Options) d(full time.Duration) time.Duration {
	return max(cmp.Or(o.Shortest, time.Second), time.Duration(float64(full)*o.scale()))
}

func (o Options) scale() float64 {
	if o.Scale <= 0 {
		return 1
	}
	return o.Scale
}

// recorder counts finished jobs per second and keeps latencies.
type recorder struct {
	start     time.Time
	done      atomic.Int64
	mu        sync.Mutex
	latencies []time.Duration
	perSecond []int64
	measure   bool // keep latencies
}

func newRecorder(measure bool) *recorder {
	return &recorder{start: time.Now(), measure: measure}
}

func (r *recorder) record(enqueued, started time.Time) {
	r.done.Add(1)
	sec := int(time.Since(r.start) / time.Second)
	r.mu.Lock()
	for len(r.perSecond) <= sec {
		r.perSecond = append(r.perSecond, 0)
	}
	r.perSecond[sec]++
	if r.measure {
		r.latencies = append(r.latencies, started.Sub(enqueued))
	}
	r.mu.Unlock()
}

// finish fills res with what was recorded until now.
func (r *recorder) finish(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Seconds = time.Since(r.start).Seconds()
	res.Jobs = r.done.Load()
	res.PerSec = float64(res.Jobs) / res.Seconds
	for i, n := range r.perSecond {
		if float64(i+1) > res.Seconds {
			break // the last second is not over: a partial count would look like a drop
		}
		res.Series = append(res.Series, Point{At: float64(i), Done: n})
	}
	if len(r.latencies) > 0 {
		slices.Sort(r.latencies)
		pct := func(p float64) float64 {
			i := min(len(r.latencies)-1, int(math.Ceil(p*float64(len(r.latencies))))-1)
			return float64(r.latencies[max(0, i)].Microseconds()) / 1000
		}
		res.P50Ms, res.P99Ms = pct(0.50), pct(0.99)
	}
}

// progress prints what r has counted every second until ctx ends.
func progress(ctx context.Context, w io.Writer, name string, r *recorder, total int64) {
	if w == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			fmt.Fprint(w, "\r\033[K")
			return
		case <-t.C:
			n := r.done.Load()
			of := ""
			if total > 0 {
				of = fmt.Sprintf(" of %d", total)
			}
			fmt.Fprintf(w, "\r\033[K%-18s %8d%s done, %7d/s", name, n, of, n-last)
			last = n
		}
	}
}

// inserted enqueues n jobs in batches on sys.
func inserted(ctx context.Context, sys System, n, batch int) error {
	return insertedWith(ctx, sys.Enqueue, n, batch)
}

// insertedWith inserts n jobs in batches with insert.
func insertedWith(ctx context.Context, insert func(context.Context, int) error, n, batch int) error {
	for n > 0 {
		k := min(batch, n)
		if err := insert(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Insert measures enqueue throughput: n jobs in batches of batch, each
// batch one call, through the system's BulkInserter when it has one.
func Insert(ctx context.Context, sys System, o Options, batch int) (Result, error) {
	res := Result{Scenario: fmt.Sprintf("insert, batches of %d", batch), System: sys.Name()}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	n := o.n(100_000)
	insert := sys.Enqueue
	if b, ok := sys.(BulkInserter); ok {
		insert = b.InsertMany
	}
	start := time.Now()
	if err := insertedWith(ctx, insert, n, batch); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.Jobs = int64(n)
	res.PerSec = float64(n) / res.Seconds
	return res, nil
}

// Drain pre-inserts jobs, then measures how fast workers drain them, from
// start until the last one finished.
func Drain(ctx context.Context, sys System, o Options, workers int) (Result, error) {
	return drain(ctx, sys, o, fmt.Sprintf("drain, %d workers", workers), workers, nil)
}

// drain runs Drain with setup run after the reset (history, backlog).
func drain(ctx context.Context, sys System, o Options, name string, workers int, setup func() error) (Result, error) {
	res := Result{Scenario: name, System: sys.Name()}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	if setup != nil {
		if err := setup(); err != nil {
			return res, err
		}
	}
	n := o.n(100_000)
	if err := inserted(ctx, sys, n, 5000); err != nil {
		return res, err
	}
	if a, ok := sys.(Analyzer); ok {
		if err := a.Analyze(ctx); err != nil {
			return res, err
		}
	}
	rec := newRecorder(false)
	all := make(chan struct{})
	var once sync.Once
	stop, err := sys.Start(ctx, workers, min(workers, 1000), 0, func(e, s time.Time) {
		rec.record(e, s)
		if rec.done.Load() >= int64(n) {
			once.Do(func() { close(all) })
		}
	})
	if err != nil {
		return res, err
	}
	pctx, cancel := context.WithCancel(ctx)
	go progress(pctx, o.Progress, name, rec, int64(n))
	select {
	case <-all:
	case <-ctx.Done():
	}
	cancel()
	rec.finish(&res)
	return res, errors.Join(ctx.Err(), stop(context.WithoutCancel(ctx)))
}

// Flat runs producers that enqueue batches of batch as fast as they can
// for d, with workers working them, and measures completions and
// enqueue-to-start latency. One job per enqueue is batch 1.
func Flat(ctx context.Context, sys System, o Options, batch, producers, workers int) (Result, error) {
	name := fmt.Sprintf("flat out, batches of %d", batch)
	if batch == 1 {
		name = "one job per enqueue"
	}
	return produce(ctx, sys, o, name, workers, producers, func(ctx context.Context) error {
		return sys.Enqueue(ctx, batch)
	})
}

// Paced enqueues rate jobs per second (in batches every millisecond or so)
// for d, with workers, and measures completions and latency; with hold it
// does so while another session holds a snapshot.
func Paced(ctx context.Context, sys System, o Options, rate, workers int, hold bool) (Result, error) {
	name := fmt.Sprintf("paced %d/s", rate)
	var release func()
	if hold {
		name += ", snapshot held"
		sn, ok := sys.(Snapshotter)
		if !ok {
			return Result{Scenario: name, System: sys.Name()}, ErrNotApplicable
		}
		defer func() {
			if release != nil {
				release()
			}
		}()
		var err error
		if release, err = sn.HoldSnapshot(ctx); err != nil {
			return Result{Scenario: name, System: sys.Name()}, err
		}
	}
	const tick = 5 * time.Millisecond
	perTick := float64(rate) * tick.Seconds()
	var owed float64
	var next time.Time
	return produce(ctx, sys, o, name, workers, 1, func(ctx context.Context) error {
		if next.IsZero() {
			next = time.Now()
		}
		time.Sleep(time.Until(next))
		next = next.Add(tick)
		owed += perTick
		k := int(owed)
		owed -= float64(k)
		if k == 0 {
			return nil
		}
		return sys.Enqueue(ctx, k)
	})
}

// produce runs producers calling enq in a loop for the scenario's time,
// with workers, and reports completions and latency.
func produce(ctx context.Context, sys System, o Options, name string, workers, producers int, enq func(context.Context) error) (Result, error) {
	res := Result{Scenario: name, System: sys.Name()}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	rec := newRecorder(true)
	stop, err := sys.Start(ctx, workers, min(workers, 1000), 0, rec.record)
	if err != nil {
		return res, err
	}
	run, cancel := context.WithTimeout(ctx, o.d(60*time.Second))
	defer cancel()
	go progress(run, o.Progress, name, rec, 0)
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for run.Err() == nil {
				if err := enq(run); err != nil && run.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	rec.finish(&res) // completions within the run's time
	close(errs)
	return res, errors.Join(<-errs, stop(context.WithoutCancel(ctx)))
}

// LargeHistory drains with history finished jobs already kept.
func LargeHistory(ctx context.Context, sys System, o Options, history int) (Result, error) {
	n := o.n(history)
	return drain(ctx, sys, o, fmt.Sprintf("drain, %d finished kept", n), 1000, func() error {
		return sys.History(ctx, n)
	})
}

// LargeBacklog drains with backlog jobs waiting that no worker takes.
func LargeBacklog(ctx context.Context, sys System, o Options, backlog int) (Result, error) {
	n := o.n(backlog)
	return drain(ctx, sys, o, fmt.Sprintf("drain, %d waiting", n), 1000, func() error {
		return sys.Backlog(ctx, n)
	})
}

// PausedQueues drains with n other queues paused, each holding 10 jobs:
// what a claim costs must not grow with the queues it does not take from.
func PausedQueues(ctx context.Context, sys System, o Options, n int) (Result, error) {
	p, ok := sys.(Pauser)
	if !ok {
		return Result{Scenario: fmt.Sprintf("drain, %d queues paused", n), System: sys.Name()}, ErrNotApplicable
	}
	return drain(ctx, sys, o, fmt.Sprintf("drain, %d queues paused", n), 1000, func() error {
		return p.PausedQueues(ctx, n, 10)
	})
}

// groupsPatience is how long Groups waits past its window for the first
// 1,000 jobs to finish.
const groupsPatience = 2 * time.Minute

// Groups drains 1,000 groups of one job each behind one group of 20,000
// (limit 1 each) with 100 workers, and reports how long the small groups
// took: a busy group must hold back nothing else.
func Groups(ctx context.Context, sys System, o Options) (Result, error) {
	res := Result{Scenario: "groups: 1 of 20000 among 1000", System: sys.Name()}
	g, ok := sys.(Grouper)
	if !ok {
		return res, ErrNotApplicable
	}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	big := o.n(20_000)
	for left := big; left > 0; left -= 5000 {
		if err := g.EnqueueGrouped(ctx, "big", min(5000, left)); err != nil {
			return res, err
		}
	}
	for i := range 999 {
		if err := g.EnqueueGrouped(ctx, fmt.Sprint("small-", i), 1); err != nil {
			return res, err
		}
	}
	rec := newRecorder(true)
	var smallDone atomic.Int64
	smallAt := make(chan time.Duration, 1)
	stop, err := sys.Start(ctx, 100, 100, time.Millisecond, func(e, s time.Time) {
		rec.record(e, s)
		if rec.done.Load() >= 1000 && smallDone.Add(1) == 1 {
			smallAt <- time.Since(rec.start)
		}
	})
	if err != nil {
		return res, err
	}
	run, cancel := context.WithTimeout(ctx, o.d(30*time.Second))
	defer cancel()
	go progress(run, o.Progress, res.Scenario, rec, 0)
	select {
	case d := <-smallAt:
		res.Extra = map[string]float64{"first_1000_s": d.Seconds()}
		<-run.Done()
	case <-run.Done():
		// The window ended before the first 1,000 jobs did (a small scale
		// on a loaded machine: the window is a second): wait for them
		// rather than report nothing.
		select {
		case d := <-smallAt:
			res.Extra = map[string]float64{"first_1000_s": d.Seconds()}
		case <-time.After(groupsPatience):
		case <-ctx.Done():
		}
	}
	rec.finish(&res)
	return res, stop(context.WithoutCancel(ctx))
}

// Harness reproduces the independent harness's shape: the queue kept
// topped up to depth jobs, 32 workers, 1 ms jobs, for the scenario's time;
// Extra["flatness"] is the lowest 30-second window's throughput divided by
// the highest (1 is flat).
func Harness(ctx context.Context, sys System, o Options) (Result, error) {
	const depth = 4000
	res := Result{Scenario: "harness: depth 4000, 32 workers, 1 ms", System: sys.Name()}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	if err := inserted(ctx, sys, depth, 1000); err != nil {
		return res, err
	}
	rec := newRecorder(false)
	stop, err := sys.Start(ctx, 32, 32, time.Millisecond, rec.record)
	if err != nil {
		return res, err
	}
	run, cancel := context.WithTimeout(ctx, o.d(5*time.Minute))
	defer cancel()
	go progress(run, o.Progress, res.Scenario, rec, 0)
	var enqueued int64 = depth
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for run.Err() == nil {
		select {
		case <-run.Done():
		case <-t.C:
			if k := depth - (enqueued - rec.done.Load()); k > 0 {
				if err := inserted(run, sys, int(k), 1000); err != nil && run.Err() == nil {
					return res, errors.Join(err, stop(context.WithoutCancel(ctx)))
				}
				enqueued += k
			}
		}
	}
	rec.finish(&res)
	res.Extra = map[string]float64{"flatness": flatness(res.Series, 30)}
	return res, stop(context.WithoutCancel(ctx))
}

// flatness is the lowest window-second mean of series divided by the
// highest, over whole windows after the first one (warm-up).
func flatness(series []Point, window int) float64 {
	var means []float64
	for i := window; i+window <= len(series); i += window {
		var sum int64
		for _, p := range series[i : i+window] {
			sum += p.Done
		}
		means = append(means, float64(sum)/float64(window))
	}
	if len(means) == 0 {
		return 0
	}
	lo, hi := slices.Min(means), slices.Max(means)
	if hi == 0 {
		return 0
	}
	return lo / hi
}

// Depth measures what counting the queue depth costs with history
// finished jobs kept and backlog waiting: Extra["depth_ms"].
func Depth(ctx context.Context, sys System, o Options, history, backlog int) (Result, error) {
	res := Result{Scenario: "depth count", System: sys.Name()}
	if err := sys.Reset(ctx); err != nil {
		return res, err
	}
	if err := sys.History(ctx, o.n(history)); err != nil {
		return res, err
	}
	if err := sys.Backlog(ctx, o.n(backlog)); err != nil {
		return res, err
	}
	var best time.Duration
	for i := range 5 {
		start := time.Now()
		if _, err := sys.Depth(ctx); err != nil {
			return res, err
		}
		if d := time.Since(start); i == 0 || d < best {
			best = d
		}
	}
	res.Extra = map[string]float64{"depth_ms": float64(best.Microseconds()) / 1000}
	return res, nil
}
