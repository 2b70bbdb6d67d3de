package faults_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/history"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
)

var faultsFlows = flag.Bool("faults.flows", false,
	"run TestFlowsSoak: random flows under worker SIGKILLs, a PostgreSQL restart, cancels and retries (-faults.duration sets the length; 20 s if unset)")

// flowsPerTenMinutes is the soak's pace: 10,000 flows in 10 minutes,
// proportionally fewer in a shorter run.
const flowsPerTenMinutes = 10000

// TestFlowsSoak: an enqueuer stores random flows (chains, diamonds,
// fan-outs, fan-ins, random DAGs, now and then one parent with more
// children than a transaction resolves inline; edges of all three
// policies; some naming earlier jobs by id) at 10,000 flows per 10
// minutes, while three worker processes claim, complete and fail their
// jobs (one in six fails its first attempt; with one attempt allowed,
// that fails it for good), one of them SIGKILLed and restarted every 2-6
// s (its jobs' leases run out and the rescuer retries them, or fails
// those with no attempt left), PostgreSQL is SIGKILLed once halfway and
// restarted, an operator cancels live jobs and retries failed and
// cancelled ones, and a rescuer (which also resolves the edges wide
// flows leave over) runs in the test process besides the workers' own.
// Then the jobs drain and the whole history is checked against the
// flows' edges: no child claimed before its parents succeeded (ended,
// under run_anyway), no child stranded, and every invariant of the
// other scenarios; and the rows themselves: every blocked job's
// waiting_on equals its unresolved edges, and one of them leads to a
// parent that can still release it. Off by default:
//
//	go test -count=1 -timeout 30m -run TestFlowsSoak ./faults/ -args -faults.flows -faults.duration 10m
func TestFlowsSoak(t *testing.T) {
	if !*faultsFlows {
		t.Skip("the flows soak runs only when asked: go test -run TestFlowsSoak ./faults/ -args -faults.flows [-faults.duration 10m]")
	}
	d := loadFor(20 * time.Second)
	target := max(1, int(int64(flowsPerTenMinutes)*int64(d)/int64(10*time.Minute)))
	srv := pgtest.ServerFor(t, pgtest.Options{Settings: durable})
	url := srv.URL(newDatabase(t, srv))
	s := openPG(t, url)
	r := newRun(t, "flows-soak", s, pgNow(s))
	spec := goWorker("postgres", url)
	slots := []string{"w1", "w2", "w3"}
	live := map[string]*proc{}
	for _, slot := range slots {
		live[slot] = r.worker(slot, spec)
	}

	// The rescuer (and flow resolver) of the test process, until the end.
	rescueCtx, stopRescue := context.WithCancel(context.Background())
	var rescueWG sync.WaitGroup
	rescueWG.Go(func() { readpast.RunRescuer(rescueCtx, s, 0, slog.New(slog.DiscardHandler)) })
	defer func() { stopRescue(); rescueWG.Wait() }()

	book := newFlowBook()
	start, end := time.Now(), time.Now().Add(d)
	var stored atomic.Int64
	var wg sync.WaitGroup
	// The enqueuer keeps the pace: by each tick, its share of the target.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for now := time.Now(); now.Before(end); now = time.Now() {
			want := int64(float64(target) * float64(now.Sub(start)) / float64(d))
			for n := 0; stored.Load() < want && n < 50 && r.ctx.Err() == nil; n++ {
				switch book.enqueueFlow(r.ctx, s, r.hlog, rng) {
				case "stored":
					stored.Add(1)
				case "unknown": // the database away: wait a little
					time.Sleep(200 * time.Millisecond)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		for time.Now().Before(end) && r.ctx.Err() == nil {
			book.operate(r.ctx, s, r.hlog, rng)
			time.Sleep(20 * time.Millisecond)
		}
	})

	// Faults: a worker process SIGKILLed every 2-6 s, PostgreSQL once,
	// halfway.
	kills, pgDown := 0, false
	var pgBack time.Time
	var atBack []string // the worker processes running when PostgreSQL came back
	nextKill := start.Add(2*time.Second + rand.N(4*time.Second))
	for time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
		if !pgDown && time.Since(start) >= d/2 {
			pgDown = true
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second + rand.N(time.Second))
			if err := srv.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			pgBack = time.Now()
			for _, p := range live {
				atBack = append(atBack, p.name)
			}
			r.fault("postgres back", pgBack, atBack...)
		}
		if time.Now().After(nextKill) && time.Now().Add(time.Second).Before(end) {
			slot := slots[rand.IntN(len(slots))]
			live[slot] = r.restart(live[slot], rand.N(300*time.Millisecond), func() *proc { return r.worker(slot, spec) })
			kills++
			nextKill = time.Now().Add(2*time.Second + rand.N(4*time.Second))
		}
	}
	wg.Wait()
	if err := drainFlows(r, s); err != nil {
		t.Error(err)
	}
	stopRescue()
	rescueWG.Wait()

	rep, states := judgeFlows(r, s, book)
	bad := badBlockedRows(t, s)
	for _, b := range bad {
		t.Errorf("flows-soak: %s", b)
	}

	b := book
	t.Logf("flows-soak: %v, flows=%d jobs=%d edges=%d (by id %d) kills=%d pg_restarts=1 early_starts=%d stranded=%d bad_rows=%d",
		d, b.outcomes["stored"], len(b.ids), len(b.edges), b.byID, kills, rep.EarlyStarts, rep.Stranded, len(bad))
	t.Logf("flows-soak: shapes %v; EnqueueFlow outcomes %v; operator %v; final states %s", b.shapes, b.outcomes, b.ops, joinStates(states))
	t.Logf("faults: %-26s %s", r.name, rep.Summary())
	ds := history.Resumed(rep.events, pgBack)
	maps.DeleteFunc(ds, func(p string, _ time.Duration) bool { return !slices.Contains(atBack, p) })
	t.Logf("flows-soak: after the PostgreSQL restart, the %d worker processes running then claimed again within (min/median/max over those that did) %s",
		len(atBack), history.Spread(ds))

	for _, p := range rep.Problems {
		t.Errorf("flows-soak: %s", p)
	}
	if !rep.OK() {
		t.Errorf("flows-soak: %s", rep.Summary())
	}
	if states[readpast.StatePending]+states[readpast.StateRunning] > 0 {
		t.Errorf("flows-soak: jobs left to run after the drain: %s", joinStates(states))
	}
	if len(b.invalid) > 0 {
		t.Errorf("flows-soak: %d flows refused as invalid (the generator's bug), the first: %s", len(b.invalid), b.invalid[0])
	}
	// The run must have exercised what it claims to.
	switch {
	case b.outcomes["stored"] < target*9/10:
		t.Errorf("flows-soak: %d flows stored, want about %d", b.outcomes["stored"], target)
	case kills == 0 || !pgDown:
		t.Errorf("flows-soak: %d worker kills, PostgreSQL restarted: %v", kills, pgDown)
	case b.byID == 0 || b.ops["cancel"] == 0 || b.ops["retry"] == 0:
		t.Errorf("flows-soak: too little exercised: %d edges to earlier jobs, operator %v", b.byID, b.ops)
	case states[readpast.StateSucceeded] == 0 || states[readpast.StateFailed] == 0 || states[readpast.StateCancelled] == 0:
		t.Errorf("flows-soak: too little exercised: final states %s", joinStates(states))
	}
}

// drainFlows waits until no job is pending or running and the resolver
// has nothing left: a child released by the resolver after the queue
// looked empty would otherwise be judged stranded.
func drainFlows(r *run, s *postgres.Store) error {
	for range 100 {
		if err := r.drain(5 * time.Minute); err != nil {
			return err
		}
		n := 0
		err := retry(context.Background(), func(ctx context.Context) error {
			for {
				k, err := s.ResolveFlows(ctx, 5000)
				if err != nil {
					return err
				}
				n += k
				if k == 0 {
					return nil
				}
			}
		})
		if err != nil {
			return fmt.Errorf("resolve flows: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
	return errors.New("the resolver kept releasing jobs through 100 drains")
}

// flowsReport is history.Check's report with the events it judged.
type flowsReport struct {
	history.Report
	events []history.Event
}

// judgeFlows stops every worker process gracefully, reads the histories
// and the final state of every job they name, and checks them with the
// flows' edges. It returns the report and the final states of the jobs
// the book knows.
func judgeFlows(r *run, s *postgres.Store, book *flowBook) (flowsReport, map[readpast.JobState]int) {
	t := r.t
	t.Helper()
	r.cancel()
	var wg sync.WaitGroup
	for _, p := range r.live() {
		wg.Go(func() {
			if err := p.term(); err != nil {
				t.Errorf("worker %s: %v", p.name, err)
			}
		})
	}
	wg.Wait()
	if err := r.hlog.Close(); err != nil {
		t.Error(err)
	}
	evs, bad, err := history.Read(filepath.Join(r.dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	for _, e := range evs {
		if e.ID != 0 {
			ids[e.ID] = true
		}
	}
	for _, ed := range book.edges {
		ids[ed.Parent], ids[ed.Child] = true, true
	}
	final := readFinals(t, s, slices.Collect(maps.Keys(ids)))
	var now time.Time
	if err := retry(context.Background(), func(ctx context.Context) (err error) { now, err = r.dbNow(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	limits, rates := checkedLimits()
	rep := history.Check(history.Input{Events: evs, Final: final, Limits: limits, Rates: rates, Edges: book.edges, DBNow: now})
	rep.BadLines = bad
	if bad > 0 {
		t.Logf("flows-soak: %d history lines cut by a kill", bad)
	}
	states := map[readpast.JobState]int{}
	for _, id := range book.ids {
		if f := final[id]; !f.Missing {
			states[f.State]++
		}
	}
	return flowsReport{rep, evs}, states
}

// readFinals reads the final state of each of ids, four at a time.
func readFinals(t *testing.T, s readpast.Store, ids []int64) map[int64]history.Final {
	t.Helper()
	var mu sync.Mutex
	final := make(map[int64]history.Final, len(ids))
	var errs []error
	work := make(chan int64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for id := range work {
				var j *readpast.Job
				err := retry(context.Background(), func(ctx context.Context) (err error) {
					j, err = s.Get(ctx, id)
					if errors.Is(err, readpast.ErrNotFound) {
						return nil
					}
					return err
				})
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("read job %d: %w", id, err))
				case j == nil:
					final[id] = history.Final{Missing: true}
				default:
					final[id] = history.Final{State: j.State, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	return final
}

// badBlockedRows checks the rows, whatever the history knows: every
// blocked job's waiting_on must equal its unresolved edges ('open' or
// 'held'), and one of those must lead to a parent that can still release
// it: a live one, a finished one holding it, or one with edges left to
// the resolver. It returns the jobs that break either.
func badBlockedRows(t *testing.T, s *postgres.Store) []string {
	t.Helper()
	var out []string
	err := retry(context.Background(), func(ctx context.Context) error {
		out = nil
		rows, err := s.Pool().Query(ctx, `
			SELECT c.id, c.waiting_on,
			       (SELECT count(*) FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done'),
			       EXISTS (SELECT 1 FROM readpast_edges e
			               WHERE e.child_id = c.id AND e.state <> 'done'
			                 AND (EXISTS (SELECT 1 FROM readpast_jobs p WHERE p.id = e.parent_id)
			                      OR (e.state = 'held' AND EXISTS (SELECT 1 FROM readpast_jobs_history h WHERE h.id = e.parent_id))
			                      OR EXISTS (SELECT 1 FROM readpast_flow_backlog b WHERE b.parent_id = e.parent_id)))
			FROM readpast_jobs c WHERE c.state = 'blocked' ORDER BY c.id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var waiting, open int
			var releasable bool
			if err := rows.Scan(&id, &waiting, &open, &releasable); err != nil {
				return err
			}
			if waiting != open || !releasable {
				out = append(out, fmt.Sprintf("blocked job %d: waiting_on %d, unresolved edges %d, a parent that can release it: %v", id, waiting, open, releasable))
			}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("check the blocked rows: %v", err)
	}
	if len(out) > 50 {
		out = append(out[:50], fmt.Sprintf("... and %d more", len(out)-50))
	}
	return out
}

// joinStates formats state counts in a fixed order.
func joinStates(m map[readpast.JobState]int) string {
	var parts []string
	for _, s := range readpast.AllStates {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, m[s]))
		}
	}
	return strings.Join(parts, " ")
}
