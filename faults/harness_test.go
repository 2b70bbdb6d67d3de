package faults_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/history"
)

var faultsDuration = flag.Duration("faults.duration", 0,
	"how long each fault scenario keeps enqueuing and doing damage (0: the short mode, a few seconds each)")

// loadFor is how long a scenario runs its load: its short-mode default
// unless -faults.duration says otherwise.
func loadFor(short time.Duration) time.Duration {
	if *faultsDuration > 0 {
		return *faultsDuration
	}
	return short
}

// Group limits of every scenario: one group of each limit up to 3, and a
// few of the default 1.
var groupLimits = map[string]int{"g0": 1, "g1": 1, "g2": 2, "g3": 3, "g4": 1, "g5": 3}

// Keys with a rate in every scenario (docs/design/flow-control.md): r0
// gets more jobs than its rate lets start, so its bucket runs dry; the
// history checks both keys' concurrency and their starts in every second.
var rateLimits = []readpast.Limit{
	{Key: "r0", Concurrency: 3, Rate: 20, Per: time.Second, Burst: 2},
	{Key: "r1", Rate: 40, Per: time.Second, Burst: 5},
}

// checkedLimits are the concurrency limits the history is checked
// against: the groups' and the rated keys' (no bound: a billion).
func checkedLimits() (map[string]int, map[string]history.Rate) {
	limits, rates := maps.Clone(groupLimits), map[string]history.Rate{}
	for _, l := range rateLimits {
		addChecked(limits, rates, l.Key, l)
	}
	return limits, rates
}

// addChecked adds key's limit l, as the store applies it (its defaults
// filled in: a rate's period and burst), to the limits and rates the
// history is checked against.
func addChecked(limits map[string]int, rates map[string]history.Rate, key string, l readpast.Limit) {
	n, err := l.Normalize()
	if err != nil {
		panic(fmt.Sprintf("limit of %s: %v", key, err))
	}
	limits[key] = cmp.Or(n.Concurrency, 1<<30)
	if n.Rate > 0 {
		rates[key] = history.Rate{Interval: n.Interval(), Burst: n.Burst}
	}
}

// run is one scenario: worker processes, an enqueuer, faults, and the
// history they all write to files in dir.
type run struct {
	t      *testing.T
	name   string
	dir    string
	store  readpast.Store // the scenario's own connection, for enqueues and the final check
	enq    *history.Store
	hlog   *history.Log
	dbNow  func(context.Context) (time.Time, error)
	ctx    context.Context
	cancel context.CancelFunc

	// keyOf, when set, names each enqueued job's key instead of the
	// default mix of groups and rated keys; moreKeysOf, when set, the
	// keys after that first one (none for most jobs); keyLimits are the
	// limits of those keys the history is checked against too.
	keyOf      func() string
	moreKeysOf func(first string) []string
	keyLimits  map[string]readpast.Limit

	mu       sync.Mutex
	procs    []*proc
	gens     map[string]int
	faults   []faultEnd
	enqFails int
	// several counts the acknowledged jobs with more than one key.
	several int
	enqWG   sync.WaitGroup
}

// faultEnd is a moment the damage ended (a database back, a worker
// restarted), from which recovery is measured for procs (all, when none
// was named and none was live).
type faultEnd struct {
	what  string
	at    time.Time
	procs []string
	limit time.Duration // the longest recovery allowed; 0 means maxResume
}

// newRun starts a scenario on store (already migrated).
func newRun(t *testing.T, name string, store readpast.Store, dbNow func(context.Context) (time.Time, error)) *run {
	t.Helper()
	dir := t.TempDir()
	hl, err := history.Create(filepath.Join(dir, "enqueuer.jsonl"), "enqueuer")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{t: t, name: name, dir: dir, store: store, enq: history.Wrap(store, hl), hlog: hl, dbNow: dbNow,
		ctx: ctx, cancel: cancel, gens: map[string]int{}}
	t.Cleanup(func() {
		cancel()
		r.enqWG.Wait()
		for _, p := range r.live() {
			p.kill()
		}
		if t.Failed() {
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("readpast-faults-%s-%d", strings.ReplaceAll(name, "/", "-"), time.Now().Unix()))
			if err := os.CopyFS(keep, os.DirFS(dir)); err == nil {
				t.Logf("%s: histories and process output kept in %s", name, keep)
			}
		}
	})
	for g, n := range groupLimits {
		if err := retry(ctx, func(ctx context.Context) error { return store.SetGroupLimit(ctx, g, n) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range rateLimits {
		if err := retry(ctx, func(ctx context.Context) error { _, err := store.PutLimit(ctx, l); return err }); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// retry calls f until it succeeds or a minute passes.
func retry(ctx context.Context, f func(context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proc is one worker process.
type proc struct {
	name string
	slot string
	spec workerSpec
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// worker starts a Go worker process in slot (a later one in the same slot
// gets a new name: slot.N).
func (r *run) worker(slot string, spec workerSpec) *proc {
	r.mu.Lock()
	r.gens[slot]++
	name := fmt.Sprintf("%s.%d", slot, r.gens[slot])
	r.mu.Unlock()
	spec.Name = name
	spec.History = filepath.Join(r.dir, name+".jsonl")
	spec.Log = filepath.Join(r.dir, name+".log")
	raw, err := json.Marshal(spec)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envWorker+"="+string(raw))
	out, err := os.Create(filepath.Join(r.dir, name+".out"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return r.startProc(name, slot, spec, cmd, out)
}

// startProc starts cmd and tracks it as a worker process.
func (r *run) startProc(name, slot string, spec workerSpec, cmd *exec.Cmd, out *os.File) *proc {
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &proc{name: name, slot: slot, spec: spec, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p
}

// kill SIGKILLs p by pid and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// exited reports whether p has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// term stops p gracefully (SIGTERM), or kills it after 60 s. A worker
// stopping right after a half-open fault may take most of that: its Stop
// flushes completions, retried for up to a lease while each call waits out
// its 10 s timeout on connections that answer nothing (seen: over 30 s).
func (p *proc) term() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		// 130 is how the Python worker says it was interrupted; a process
		// started a moment ago may die of SIGTERM before it handles it.
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ee.ExitCode() == 130 || ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				return nil
			}
		}
		return p.err
	case <-time.After(60 * time.Second):
		// A Go process prints every goroutine's stack on SIGQUIT (into
		// its .out file, kept when the test fails): where it hung.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			p.kill()
		}
		return fmt.Errorf("%s ignored SIGTERM for 60 s (its goroutines, if a Go worker, are in %s.out)", p.name, p.name)
	}
}

// live returns the processes still running.
func (r *run) live() []*proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*proc
	for _, p := range r.procs {
		if !p.exited() {
			out = append(out, p)
		}
	}
	return out
}

// restart SIGKILLs p and starts its slot again after pause; it returns
// the new process and records the restart as a fault's end.
func (r *run) restart(p *proc, pause time.Duration, again func() *proc) *proc {
	p.kill()
	time.Sleep(pause)
	np := again()
	r.fault("restart "+p.slot, time.Now(), np.name)
	return np
}

// fault records the end of some damage.
func (r *run) fault(what string, at time.Time, procs ...string) {
	r.faultWithin(what, at, 0, procs...)
}

// faultWithin records the end of some damage that processes may take up
// to limit to recover from: procs, or, when none is named, every process
// live then (not those started later, whose first claim says nothing of
// recovering from it).
func (r *run) faultWithin(what string, at time.Time, limit time.Duration, procs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(procs) == 0 {
		for _, p := range r.procs {
			if !p.exited() {
				procs = append(procs, p.name)
			}
		}
	}
	r.faults = append(r.faults, faultEnd{what, at, procs, limit})
}

// enqueue keeps enqueuing batches of jobs until d passes: n jobs every
// 50 ms, half of them in the groups of groupLimits (one in eight of those
// naming r1 as a second key), one in eight in each of the keys of
// rateLimits, some asking their
// first attempt to fail. Failed enqueues (the database away) are counted
// and not retried: their jobs are unacknowledged.
func (r *run) enqueue(d time.Duration, n int, failing bool) {
	r.enqWG.Add(1)
	go func() {
		defer r.enqWG.Done()
		end := time.Now().Add(d)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for time.Now().Before(end) {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			ps := make([]readpast.EnqueueParams, n)
			for i := range ps {
				ps[i] = readpast.EnqueueParams{Kind: "work", MaxAttempts: 1000}
				switch k := rand.IntN(8); {
				case r.keyOf != nil:
					ps[i].Group = r.keyOf()
					if r.moreKeysOf != nil {
						if more := r.moreKeysOf(ps[i].Group); len(more) > 0 {
							ps[i].Keys = append([]string{ps[i].Group}, more...)
						}
					}
				case k < 4:
					ps[i].Group = fmt.Sprint("g", rand.IntN(len(groupLimits)))
					if rand.IntN(8) == 0 {
						// A job with several keys: it starts only when its
						// group and r1 both allow it, and holds a slot of
						// each.
						ps[i].Keys = []string{ps[i].Group, rateLimits[1].Key}
					}
				case k < 4+len(rateLimits):
					ps[i].Group = rateLimits[k-4].Key
				}
				if failing && rand.IntN(10) == 0 {
					ps[i].Payload = json.RawMessage(`{"fail":true}`)
				}
			}
			ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
			_, err := r.enq.Enqueue(ctx, ps)
			cancel()
			r.mu.Lock()
			if err != nil {
				r.enqFails++
			} else {
				for _, p := range ps {
					if len(p.Keys) > 1 {
						r.several++
					}
				}
			}
			r.mu.Unlock()
		}
	}()
}

// waitEnqueued waits for the enqueuer to finish.
func (r *run) waitEnqueued() { r.enqWG.Wait() }

// drain waits until no job is pending or running, for at most timeout,
// or half the run's damage phase when that is longer: in a long run the
// enqueuer, which keeps its pace whatever the faults do to the workers,
// can leave a backlog of many minutes' work.
func (r *run) drain(timeout time.Duration) error {
	timeout = max(timeout, *faultsDuration/2)
	start := time.Now()
	defer func() { r.t.Logf("%s: drained in %v", r.name, time.Since(start).Round(time.Millisecond)) }()
	deadline := time.Now().Add(timeout)
	var last []readpast.QueueStats
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		st, err := r.store.Stats(ctx)
		cancel()
		if err == nil {
			last = st
			busy := false
			for _, s := range st {
				busy = busy || (s.State == readpast.StatePending || s.State == readpast.StateRunning) && s.Count > 0
			}
			if !busy {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("jobs left after %v: %+v", timeout, last)
}

// result is a scenario's verdict.
type result struct {
	history.Report
	events  []history.Event
	faults  []faultEnd
	recover []time.Duration            // per fault: the slowest process to claim again
	spread  []string                   // per fault: min/median/max over processes
	resumed []map[string]time.Duration // per fault: each process's time to claim again
}

// finish stops every worker process gracefully, reads the histories and
// the final state of every job they name, checks them, logs the
// scenario's line and fails the test on any violation.
func (r *run) finish() result {
	r.t.Helper()
	res := r.measure()
	t := r.t
	rep := res.Report
	for _, p := range rep.Problems {
		t.Errorf("%s: %s", r.name, p)
	}
	if !rep.OK() {
		t.Errorf("%s: %s", r.name, rep.Summary())
	}
	if rep.Enqueued == 0 || rep.Completed+rep.Failed != rep.Enqueued || rep.Failed != 0 {
		t.Errorf("%s: %d jobs acknowledged, %d completed, %d failed for good, %d pending: want all completed", r.name, rep.Enqueued, rep.Completed, rep.Failed, rep.Pending)
	}
	// Every job ran, so a job with several keys was claimed: a history
	// with none of their later keys has a recorder that drops them, and
	// its keys went unchecked.
	r.mu.Lock()
	several := r.several
	r.mu.Unlock()
	later := 0
	for _, e := range res.events {
		if e.Op == history.OpClaim && len(e.More) > 0 {
			later++
		}
	}
	if several > 0 && later == 0 {
		t.Errorf("%s: %d jobs with several keys acknowledged, and no claim recorded a later key", r.name, several)
	}
	return res
}

// measure is finish without the verdict: it logs the line and the
// problems found, and fails nothing.
func (r *run) measure() result {
	t := r.t
	t.Helper()
	r.cancel()
	r.enqWG.Wait()
	start := time.Now()
	var wg sync.WaitGroup // all at once: each may take a while (term)
	for _, p := range r.live() {
		wg.Go(func() {
			if err := p.term(); err != nil {
				t.Errorf("worker %s: %v", p.name, err)
			}
		})
	}
	wg.Wait()
	t.Logf("%s: processes stopped in %v", r.name, time.Since(start).Round(time.Millisecond))
	if err := r.hlog.Close(); err != nil {
		t.Error(err)
	}
	evs, bad, err := history.Read(filepath.Join(r.dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[int64]bool{}
	for _, e := range evs {
		if e.ID != 0 {
			ids[e.ID] = true
		}
	}
	final := map[int64]history.Final{}
	for id := range ids {
		var j *readpast.Job
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			j, err = r.store.Get(ctx, id)
			if errors.Is(err, readpast.ErrNotFound) {
				return nil
			}
			return err
		})
		switch {
		case err != nil:
			t.Fatalf("read job %d: %v", id, err)
		case j == nil:
			final[id] = history.Final{Missing: true}
		default:
			final[id] = history.Final{State: j.State, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
		}
	}
	var now time.Time
	if err := retry(ctx, func(ctx context.Context) (err error) { now, err = r.dbNow(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	limits, rates := checkedLimits()
	for k, l := range r.keyLimits {
		addChecked(limits, rates, k, l)
	}
	rep := history.Check(history.Input{Events: evs, Final: final, Limits: limits, Rates: rates, DBNow: now})
	rep.BadLines = bad
	res := result{Report: rep, events: evs, faults: r.faults}
	for _, f := range r.faults {
		ds := history.Resumed(evs, f.at)
		if len(f.procs) > 0 {
			keep := map[string]time.Duration{}
			for _, p := range f.procs {
				if d, ok := ds[p]; ok {
					keep[p] = d
				}
			}
			ds = keep
		}
		worst := time.Duration(-1)
		for _, d := range ds {
			worst = max(worst, d)
		}
		res.recover = append(res.recover, worst)
		res.resumed = append(res.resumed, ds)
		res.spread = append(res.spread, history.Spread(ds))
	}
	t.Logf("faults: %-26s %s recover=%s (%d faults; enqueue calls failed: %d)", r.name, rep.Summary(), res.recoverText(), len(r.faults), r.enqFails)
	for _, p := range rep.Problems {
		t.Logf("%s: %s", r.name, p)
	}
	if bad > 0 {
		t.Logf("%s: %d history lines cut by a kill", r.name, bad)
	}
	return res
}

// recoverText sums up the recovery times: the median and the worst over
// faults (each fault's time is its slowest process's).
func (res result) recoverText() string {
	var v []time.Duration
	missing := 0
	for _, d := range res.recover {
		if d < 0 {
			missing++
			continue
		}
		v = append(v, d)
	}
	if len(v) == 0 {
		return "n/a"
	}
	slices.Sort(v)
	s := fmt.Sprintf("median %v max %v", v[len(v)/2].Round(time.Millisecond), v[len(v)-1].Round(time.Millisecond))
	if missing > 0 {
		s += fmt.Sprintf(" (%d faults with no process back)", missing)
	}
	return s
}

// errorsMatching counts the calls in evs whose error contains any of subs.
func errorsMatching(evs []history.Event, subs ...string) (n int, first string) {
	for _, e := range evs {
		for _, s := range subs {
			if e.Err != "" && strings.Contains(e.Err, s) {
				if n == 0 {
					first = e.Err
				}
				n++
				break
			}
		}
	}
	return n, first
}

// checkResumed logs each fault's per-process recovery (min/median/max)
// and fails when a process took more than maxResume to claim again: the
// workers' backoff promises about a second; the bound leaves room for a
// loaded machine and the race detector.
func (res result) checkResumed(t *testing.T, name string) {
	t.Helper()
	t.Logf("%s: recovery per fault, min/median/max over processes: %v", name, res.spread)
	for i, d := range res.recover {
		limit := cmp.Or(res.faults[i].limit, maxResume)
		if d > limit {
			t.Errorf("%s: after fault %d (%s) a process took %v to claim again, want at most %v: %v", name, i+1, res.faults[i].what, d, limit, res.resumed[i])
		}
	}
}

// maxResume bounds how long a process may take to claim again after the
// damage ends.
const maxResume = 3 * time.Second

// claimCallTimeout is how long a worker's claim call may wait in all (the
// client's bound on each store call it makes for itself).
const claimCallTimeout = 10 * time.Second
