package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/history"
)

// testFlowStress runs flows under everything at once for the harness's
// stress duration: producers enqueue random flows (some naming jobs of
// earlier flows as parents), workers complete, fail, fail for good,
// release or abandon what they claim (short leases, so the rescuer ends
// abandoned claims, some with their attempts used up), and an operator
// cancels jobs and retries failed and cancelled ones. Then the workers
// drain what is left, and the history checker judges the whole run: no
// child started before its parents succeeded (or ended, under
// run_anyway), none stranded, and every invariant of the plain queue.
func testFlowStress(t *testing.T, h Harness) {
	s := h.New(t)
	fs, isFlow := s.(readpast.FlowStore)
	if !isFlow {
		t.Skip("the store keeps no flows")
	}
	dir := t.TempDir()
	hl, err := history.Create(filepath.Join(dir, "history.jsonl"), "stress")
	if err != nil {
		t.Fatal(err)
	}
	ws := history.Wrap(s, hl)
	const queue = "flows"
	var (
		mu       sync.Mutex
		ids      []int64
		children = map[int64]bool{} // jobs with parents: never retried by the operator
		anyway   = map[int64]bool{} // parents of run_anyway edges: never retried either
		edges    []history.Edge
		batches  int
	)
	policies := []readpast.EdgePolicy{readpast.CancelChild, readpast.CancelChild, readpast.RunAnyway, readpast.HoldChild}
	enqueueFlow := func(ctx context.Context, rng *rand.Rand) error {
		n := 2 + rng.IntN(5)
		flow := make([]readpast.FlowJob, n)
		for i := range flow {
			flow[i] = readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: readpast.EnqueueParams{Kind: "k", Queue: queue, MaxAttempts: 1 + rng.IntN(2)}}
			for p := range i {
				if rng.IntN(3) == 0 {
					flow[i].After = append(flow[i].After, readpast.After{Ref: fmt.Sprint("j", p), Policy: policies[rng.IntN(len(policies))]})
				}
			}
		}
		mu.Lock()
		if len(ids) > 0 && rng.IntN(4) == 0 {
			flow[0].After = append(flow[0].After, readpast.After{JobID: ids[rng.IntN(len(ids))], Policy: policies[rng.IntN(len(policies))]})
		}
		mu.Unlock()
		inv := time.Now()
		// Not cut short by the end of the run: a flow whose commit went
		// through must be known.
		out, err := fs.EnqueueFlow(context.WithoutCancel(ctx), flow)
		if errors.Is(err, readpast.ErrInvalidState) || errors.Is(err, readpast.ErrNotFound) {
			return nil // an existing parent finished meanwhile: nothing stored
		}
		if err != nil {
			return err
		}
		ret := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for i, j := range out {
			hl.Add(history.Event{Op: history.OpEnqueue, ID: j.ID, Inv: inv.UnixNano(), Ret: ret.UnixNano(), Out: history.OutOK})
			ids = append(ids, j.ID)
			for _, a := range flow[i].After {
				p := a.JobID
				if a.Ref != "" {
					var k int
					fmt.Sscanf(a.Ref, "j%d", &k)
					p = out[k].ID
				}
				edges = append(edges, history.Edge{Parent: p, Child: j.ID, Policy: a.Policy})
				children[j.ID] = true
				if a.Policy == readpast.RunAnyway {
					anyway[p] = true
				}
			}
		}
		return nil
	}
	// A batch: members join in one to three calls, then the seal; each
	// member is a parent of the finishing job.
	bs, isBatch := s.(readpast.BatchStore)
	batch := func(ctx context.Context, rng *rand.Rand) error {
		ctx = context.WithoutCancel(ctx) // every batch is sealed by the end of the run
		onSuccess := rng.IntN(2) == 0
		policy := readpast.BatchPolicy(onSuccess)
		inv := time.Now()
		fin, err := bs.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: queue}, OnSuccess: onSuccess})
		if err != nil {
			return err
		}
		mu.Lock()
		hl.Add(history.Event{Op: history.OpEnqueue, ID: fin.ID, Inv: inv.UnixNano(), Ret: time.Now().UnixNano(), Out: history.OutOK})
		ids = append(ids, fin.ID)
		children[fin.ID] = true
		batches++
		mu.Unlock()
		for range 1 + rng.IntN(3) {
			members := make([]readpast.EnqueueParams, 1+rng.IntN(3))
			for i := range members {
				members[i] = readpast.EnqueueParams{Kind: "m", Queue: queue, MaxAttempts: 1 + rng.IntN(2)}
			}
			inv := time.Now()
			out, err := bs.AddToBatch(ctx, fin.ID, members)
			if errors.Is(err, readpast.ErrInvalidState) {
				break // the finishing job was cancelled (by a member, or the operator)
			}
			if err != nil {
				return err
			}
			ret := time.Now()
			mu.Lock()
			for _, j := range out {
				hl.Add(history.Event{Op: history.OpEnqueue, ID: j.ID, Inv: inv.UnixNano(), Ret: ret.UnixNano(), Out: history.OutOK})
				ids = append(ids, j.ID)
				edges = append(edges, history.Edge{Parent: j.ID, Child: fin.ID, Policy: policy})
				if policy == readpast.RunAnyway {
					anyway[j.ID] = true
				}
			}
			mu.Unlock()
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
		_, err = bs.SealBatch(ctx, fin.ID)
		return err
	}
	work := func(ctx context.Context, rng *rand.Rand, drain bool) (int, error) {
		got, err := ws.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Limit: 5, Lease: 300 * time.Millisecond, Worker: "w"})
		if err != nil {
			return 0, err
		}
		for _, j := range got {
			roll := rng.IntN(100)
			if drain {
				roll = 0
			}
			switch {
			case roll < 65:
				_, err = ws.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
			case roll < 75:
				_, err = ws.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "try again"}})
			case roll < 85:
				_, err = ws.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "give up", Discard: true}})
			case roll < 92:
				err = ws.Release(ctx, j.ID, j.Token)
			default: // abandoned: the lease runs out and the rescuer ends the claim
			}
			if err != nil && !errors.Is(err, readpast.ErrStaleToken) && !errors.Is(err, readpast.ErrNotFound) {
				return 0, err
			}
		}
		return len(got), nil
	}
	operate := func(ctx context.Context, rng *rand.Rand) error {
		mu.Lock()
		if len(ids) == 0 {
			mu.Unlock()
			return nil
		}
		id := ids[rng.IntN(len(ids))]
		retriable := !children[id] && !anyway[id]
		mu.Unlock()
		var err error
		if rng.IntN(2) == 0 {
			inv := time.Now()
			if _, err = s.Cancel(context.WithoutCancel(ctx), id); err == nil {
				// The cancel ends the job's claim, if it runs: the
				// checker must know, as the job may be retried and
				// claimed again within that claim's lease.
				hl.Add(history.Event{Op: history.OpCancel, ID: id, Inv: inv.UnixNano(), Ret: time.Now().UnixNano(), Out: history.OutOK})
			}
		} else if retriable {
			_, err = s.Retry(ctx, id)
		}
		if err != nil && !errors.Is(err, readpast.ErrInvalidState) && !errors.Is(err, readpast.ErrNotFound) {
			return err
		}
		return nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), h.StressDuration)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	loop := func(seed uint64, pause time.Duration, f func(context.Context, *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for ctx.Err() == nil {
				if err := f(ctx, rng); err != nil && ctx.Err() == nil {
					errc <- err
					return
				}
				time.Sleep(pause)
			}
		}()
	}
	for i := range 2 {
		loop(uint64(i), 2*time.Millisecond, enqueueFlow)
	}
	if isBatch {
		loop(5, 5*time.Millisecond, batch)
	}
	for i := range 6 {
		loop(uint64(10+i), time.Millisecond, func(ctx context.Context, rng *rand.Rand) error {
			_, err := work(ctx, rng, false)
			return err
		})
	}
	loop(20, 5*time.Millisecond, operate)
	loop(21, 50*time.Millisecond, func(ctx context.Context, _ *rand.Rand) error {
		_, err := s.RescueExpired(ctx, 1000)
		return err
	})
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}

	// Drain: complete whatever can still run.
	bg := context.Background()
	rng := rand.New(rand.NewPCG(99, 1))
	for idle, deadline := 0, time.Now().Add(60*time.Second); idle < 10; {
		if time.Now().After(deadline) {
			t.Fatal("the flows did not drain within 60 s")
		}
		if _, err := s.RescueExpired(bg, 1000); err != nil {
			t.Fatal(err)
		}
		n, err := work(bg, rng, true)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			idle++
			time.Sleep(50 * time.Millisecond)
		} else {
			idle = 0
		}
	}

	if err := hl.Close(); err != nil {
		t.Fatal(err)
	}
	evs, bad, err := history.Read(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	final := map[int64]history.Final{}
	states := map[readpast.JobState]int{}
	for _, id := range ids {
		j, err := s.Get(bg, id)
		if errors.Is(err, readpast.ErrNotFound) {
			final[id] = history.Final{Missing: true}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		final[id] = history.Final{State: j.State, Token: j.Token, LeaseExpiresAt: j.LeaseExpiresAt}
		states[j.State]++
	}
	for _, e := range evs {
		if e.Out == history.OutError {
			t.Logf("%s of job %d: outcome unknown: %s", e.Op, e.ID, e.Err)
		}
	}
	rep := history.Check(history.Input{Events: evs, Final: final, Edges: edges})
	t.Logf("%d flows' jobs, %d edges, %d batches: %v; %s", len(ids), len(edges), batches, states, rep.Summary())
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if !rep.OK() || bad > 0 {
		t.Fatalf("the history shows violations (%d bad lines)", bad)
	}
	counted := map[readpast.JobState]int{}
	for _, st := range ok(s.Stats(bg)).must(t) {
		if st.Queue == queue && st.Count != 0 {
			counted[st.State] = int(st.Count)
		}
	}
	if !maps.Equal(counted, states) {
		t.Errorf("Stats counts %v, the jobs are %v", counted, states)
	}
	if states[readpast.StatePending]+states[readpast.StateRunning] > 0 {
		t.Fatalf("jobs left to run after the drain: %v", states)
	}
	if len(edges) == 0 || states[readpast.StateSucceeded] == 0 || states[readpast.StateCancelled] == 0 || (isBatch && batches == 0) {
		t.Fatalf("the run exercised too little: %d edges, %d batches, %v", len(edges), batches, states)
	}
}
