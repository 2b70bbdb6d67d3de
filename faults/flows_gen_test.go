package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/history"
)

// The flows the soak enqueues, and what it knows of them: every job it
// was told of, every edge, and which jobs the operator may retry.

// flowPolicies are drawn from for each edge: cancel_child twice as often
// as the others.
var flowPolicies = []readpast.EdgePolicy{readpast.CancelChild, readpast.CancelChild, readpast.RunAnyway, readpast.HoldChild}

// flowShapes are the shapes of the soak's flows, drawn uniformly, except
// "wide" (one parent, more children than a transaction resolves inline),
// one flow in 200.
var flowShapes = []string{"chain", "diamond", "fan-out", "fan-in", "mixed"}

// maxEarlierDepth bounds the depth of the earlier jobs a flow names as
// parents, so that no flow passes readpast.MaxFlowDepth (a flow of its
// own is at most 9 deep).
const maxEarlierDepth = 60

// recentWindow is how many of the latest jobs the operator picks from:
// recent jobs are the ones still live. parentWindow is the same for the
// earlier jobs flows name as parents (at 10,000 flows in 10 minutes, 100
// jobs are the last second's or so).
const recentWindow, parentWindow = 400, 100

// flowBook is the soak's record of its flows, safe for concurrent use.
type flowBook struct {
	mu       sync.Mutex
	ids      []int64
	depth    map[int64]int  // the longest chain of edges above each job
	children map[int64]bool // jobs with parents: never retried by the operator
	anyway   map[int64]bool // parents of run_anyway edges: never retried either
	noRetry  map[int64]bool // jobs a cancel of unknown outcome may have reached
	ended    []int64        // jobs the operator cancelled: to retry
	edges    []history.Edge // every edge of every stored flow
	shapes   map[string]int // stored flows per shape
	outcomes map[string]int // EnqueueFlow outcomes: stored, refused (an earlier parent ended), unknown
	byID     int            // edges naming an earlier job by id
	invalid  []string       // flows refused as invalid: the generator's bug
	ops      map[string]int // the operator's accepted cancels and retries, and its unknown outcomes
}

func newFlowBook() *flowBook {
	return &flowBook{depth: map[int64]int{}, children: map[int64]bool{}, anyway: map[int64]bool{},
		noRetry: map[int64]bool{}, shapes: map[string]int{}, outcomes: map[string]int{}, ops: map[string]int{}}
}

// count adds one to m[k] under the lock.
func (b *flowBook) count(m map[string]int, k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m[k]++
}

// recent returns a random one of the latest window jobs, or 0 if none.
func (b *flowBook) recent(rng *rand.Rand, window int) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ids) == 0 {
		return 0
	}
	n := min(len(b.ids), window)
	return b.ids[len(b.ids)-1-rng.IntN(n)]
}

// flowJob is a job of the soak: kind "work" of the worker processes, a
// quarter of them in a group, one in six asking its first attempt to fail
// (with one attempt allowed, of three, that fails it for good).
func flowJob(rng *rand.Rand, i int) readpast.FlowJob {
	p := readpast.EnqueueParams{Kind: "work", MaxAttempts: 1 + rng.IntN(3)}
	if rng.IntN(4) == 0 {
		p.Group = fmt.Sprint("g", rng.IntN(len(groupLimits)))
	}
	if rng.IntN(6) == 0 {
		p.Payload = json.RawMessage(`{"fail":true}`)
	}
	return readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: p}
}

// after makes an edge to the job of the flow with ref j<i>.
func after(rng *rand.Rand, i int) readpast.After {
	return readpast.After{Ref: fmt.Sprint("j", i), Policy: flowPolicies[rng.IntN(len(flowPolicies))]}
}

// makeFlow draws a flow of a random shape.
func makeFlow(rng *rand.Rand) (string, []readpast.FlowJob) {
	shape := flowShapes[rng.IntN(len(flowShapes))]
	if rng.IntN(200) == 0 {
		shape = "wide"
	}
	var flow []readpast.FlowJob
	add := func(parents ...int) {
		j := flowJob(rng, len(flow))
		for _, p := range parents {
			j.After = append(j.After, after(rng, p))
		}
		flow = append(flow, j)
	}
	switch shape {
	case "chain": // j0 -> j1 -> ... -> jn
		add()
		for i := range 1 + rng.IntN(7) {
			add(i)
		}
	case "diamond": // j0 -> (j1 .. jk) -> jk+1, one to three layers
		add()
		top := 0
		for range 1 + rng.IntN(3) {
			k := 2 + rng.IntN(3)
			var mids []int
			for range k {
				mids = append(mids, len(flow))
				add(top)
			}
			top = len(flow)
			add(mids...)
		}
	case "fan-out": // j0 -> j1 .. jn
		add()
		for range 3 + rng.IntN(10) {
			add(0)
		}
	case "fan-in": // j0 .. jn-1 -> jn
		n := 3 + rng.IntN(10)
		var ps []int
		for i := range n {
			add()
			ps = append(ps, i)
		}
		add(ps...)
	case "mixed": // a random DAG
		for i := range 2 + rng.IntN(7) {
			var ps []int
			for p := range i {
				if rng.IntN(3) == 0 {
					ps = append(ps, p)
				}
			}
			add(ps...)
		}
	case "wide": // past the 128 edges a transaction resolves inline
		add()
		for range 130 + rng.IntN(130) {
			add(0)
		}
	}
	return shape, flow
}

// linkEarlier gives each job of flow without parents in it, one in four,
// an edge to one of the latest jobs (at most two such edges a flow), and
// reports whether it gave any.
func (b *flowBook) linkEarlier(rng *rand.Rand, flow []readpast.FlowJob) bool {
	linked := 0
	for i := range flow {
		if len(flow[i].After) > 0 || linked == 2 || rng.IntN(4) != 0 {
			continue
		}
		id := b.recent(rng, parentWindow)
		b.mu.Lock()
		deep := b.depth[id] > maxEarlierDepth
		b.mu.Unlock()
		if id == 0 || deep {
			continue
		}
		flow[i].After = append(flow[i].After, readpast.After{JobID: id, Policy: flowPolicies[rng.IntN(len(flowPolicies))]})
		linked++
	}
	return linked > 0
}

// enqueueFlow draws a flow and stores it on fs, recording its jobs (one
// enqueue event each) in hl and its edges in the book. A flow refused
// because an earlier job it names has ended stores nothing, and is tried
// once more without its edges to earlier jobs (so that every shape gets
// its share); one whose outcome is unknown (the database away) is
// recorded as a failed call: its jobs, if stored, are run but not judged
// as flows. It returns the outcome of the last try: "stored", "refused",
// "invalid" or "unknown".
func (b *flowBook) enqueueFlow(ctx context.Context, fs readpast.FlowStore, hl *history.Log, rng *rand.Rand) string {
	shape, flow := makeFlow(rng)
	if !b.linkEarlier(rng, flow) {
		return b.storeFlow(ctx, fs, hl, shape, flow)
	}
	if out := b.storeFlow(ctx, fs, hl, shape, flow); out != "refused" {
		return out
	}
	for i := range flow {
		flow[i].After = slices.DeleteFunc(flow[i].After, func(a readpast.After) bool { return a.JobID != 0 })
	}
	return b.storeFlow(ctx, fs, hl, shape, flow)
}

// storeFlow stores flow (of shape) on fs and records it: enqueueFlow's
// one try.
func (b *flowBook) storeFlow(ctx context.Context, fs readpast.FlowStore, hl *history.Log, shape string, flow []readpast.FlowJob) string {
	norm, err := readpast.NormalizeFlow(flow, time.Now())
	if err != nil {
		b.mu.Lock()
		b.invalid = append(b.invalid, err.Error())
		b.mu.Unlock()
		return "invalid"
	}
	inv := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	out, err := fs.EnqueueFlow(cctx, norm)
	cancel()
	ret := time.Now()
	switch {
	case errors.Is(err, readpast.ErrInvalidState) || errors.Is(err, readpast.ErrNotFound):
		b.count(b.outcomes, "refused")
		return "refused"
	case errors.Is(err, readpast.ErrInvalid):
		b.mu.Lock()
		b.invalid = append(b.invalid, err.Error())
		b.mu.Unlock()
		return "invalid"
	case err != nil:
		hl.Add(history.Event{Op: history.OpEnqueue, Inv: inv.UnixNano(), Ret: ret.UnixNano(), Out: history.OutError, N: len(flow), Err: err.Error()})
		b.count(b.outcomes, "unknown")
		return "unknown"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.outcomes["stored"]++
	b.shapes[shape]++
	for i, j := range out {
		hl.Add(history.Event{Op: history.OpEnqueue, ID: j.ID, Group: flow[i].Job.Group, Inv: inv.UnixNano(), Ret: ret.UnixNano(), Out: history.OutOK})
		b.ids = append(b.ids, j.ID)
		for _, a := range flow[i].After {
			p := a.JobID
			if a.Ref != "" {
				var k int
				if _, err := fmt.Sscanf(a.Ref, "j%d", &k); err != nil {
					panic(err) // the refs are the generator's own
				}
				p = out[k].ID
			} else {
				b.byID++
			}
			b.edges = append(b.edges, history.Edge{Parent: p, Child: j.ID, Policy: a.Policy})
			b.children[j.ID] = true
			b.depth[j.ID] = max(b.depth[j.ID], b.depth[p]+1)
			if a.Policy == readpast.RunAnyway {
				b.anyway[p] = true
			}
		}
	}
	return "stored"
}

// operate is one move of the operator. One move in three it retries a
// job it saw end without succeeding (or cancelled itself), if no edge
// forbids it (a retried child would run before its parents, by design; a
// retried run_anyway parent would be live again after its child ran).
// Otherwise it reads a recent job and cancels it if it is live (one time
// in two), or retries it as above. Accepted cancels are recorded in hl:
// they end the job's claim. A cancel whose outcome is unknown bars the
// job from retries, as the checker cannot tell when its claim ended.
func (b *flowBook) operate(ctx context.Context, s readpast.Store, hl *history.Log, rng *rand.Rand) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b.mu.Lock()
	var id int64
	fromEnded := len(b.ended) > 0 && rng.IntN(3) == 0
	if fromEnded {
		k := rng.IntN(len(b.ended))
		id = b.ended[k]
		b.ended[k] = b.ended[len(b.ended)-1]
		b.ended = b.ended[:len(b.ended)-1]
	}
	b.mu.Unlock()
	if !fromEnded {
		if id = b.recent(rng, recentWindow); id == 0 {
			return
		}
	}
	j, err := s.Get(cctx, id)
	if err != nil {
		return
	}
	switch j.State {
	case readpast.StatePending, readpast.StateRunning, readpast.StateBlocked:
		if fromEnded || rng.IntN(2) == 0 {
			return
		}
		inv := time.Now()
		_, err := s.Cancel(cctx, id)
		switch {
		case err == nil:
			hl.Add(history.Event{Op: history.OpCancel, ID: id, Inv: inv.UnixNano(), Ret: time.Now().UnixNano(), Out: history.OutOK})
			b.mu.Lock()
			b.ops["cancel"]++
			if b.retriable(id) {
				b.ended = append(b.ended, id)
			}
			b.mu.Unlock()
		case !errors.Is(err, readpast.ErrInvalidState) && !errors.Is(err, readpast.ErrNotFound):
			b.mu.Lock()
			b.noRetry[id] = true
			b.ops["cancel unknown"]++
			b.mu.Unlock()
		}
	case readpast.StateFailed, readpast.StateCancelled:
		b.mu.Lock()
		ok := b.retriable(id)
		b.mu.Unlock()
		if !ok {
			return
		}
		switch _, err := s.Retry(cctx, id); {
		case err == nil:
			b.count(b.ops, "retry")
		case !errors.Is(err, readpast.ErrInvalidState) && !errors.Is(err, readpast.ErrNotFound):
			b.count(b.ops, "retry unknown")
		}
	}
}

// retriable reports whether the operator may retry id; b.mu is held.
func (b *flowBook) retriable(id int64) bool {
	return !b.children[id] && !b.anyway[id] && !b.noRetry[id]
}
