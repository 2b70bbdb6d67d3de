package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Attacks on flow retention (docs/design/workflows.md, "Retention"):
// shapes and cursors every store must survive, run by each store's
// TestAdvPruneShapes, and the helpers its own attacks share.

// RetentionStore is what the flow-retention attacks need of a store.
type RetentionStore interface {
	readpast.Store
	readpast.FlowStore
	readpast.BatchStore
	readpast.FlowPruner
	readpast.FlowInspector
}

// RetentionFlow stores jobs as one flow.
func RetentionFlow(t *testing.T, s RetentionStore, jobs ...readpast.FlowJob) []*readpast.Job {
	t.Helper()
	js, err := s.EnqueueFlow(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// RetentionJob is a flow job of kind k on queue q after the given edges.
func RetentionJob(ref, q string, after ...readpast.After) readpast.FlowJob {
	return readpast.FlowJob{Ref: ref, Job: readpast.EnqueueParams{Kind: "k", Queue: q, MaxAttempts: 1}, After: after}
}

// RetentionRun claims exactly job id from queue q and ends it: succeeded, or
// failed for good when fail.
func RetentionRun(t *testing.T, s RetentionStore, q string, id int64, fail bool) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "adv", Queues: []string{q}, Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != id {
		ids := []int64{}
		for _, j := range got {
			ids = append(ids, j.ID)
		}
		t.Fatalf("claimed %v from %q, want job %d", ids, q, id)
	}
	if fail {
		errs, err := s.Fail(ctx, []readpast.Failure{{ID: id, Token: got[0].Token, Message: "boom", Discard: true}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		return
	}
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: id, Token: got[0].Token}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
}

// RetentionThere reports whether job id still exists (live or in history).
func RetentionThere(t *testing.T, s RetentionStore, id int64) bool {
	t.Helper()
	_, err := s.Get(context.Background(), id)
	if errors.Is(err, readpast.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// RetentionWant checks that each job of ids is there (there) or gone.
func RetentionWant(t *testing.T, s RetentionStore, what string, there bool, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if got := RetentionThere(t, s, id); got != there {
			t.Errorf("%s: job %d there=%v, want %v", what, id, got, there)
		}
	}
}

// RetentionPruneAll runs PruneFlows with p (Limit as given) until it says it
// is done, checking that its cursor only goes up, and returns how many
// jobs it deleted and how many calls it made.
func RetentionPruneAll(t *testing.T, s RetentionStore, p readpast.FlowPruneParams) (deleted, calls int) {
	t.Helper()
	for {
		n, next, err := s.PruneFlows(context.Background(), p)
		calls++
		if err != nil {
			t.Fatal(err)
		}
		deleted += n
		if next == 0 {
			return deleted, calls
		}
		if next <= p.After {
			t.Fatalf("PruneFlows after %d returned next %d: the cursor must go up", p.After, next)
		}
		if calls > 100000 {
			t.Fatal("PruneFlows never ends")
		}
		p.After = next
	}
}

// RetentionCounted sums the store's Stats per state, and compares every
// state's count with the jobs List finds in it.
func RetentionCounted(t *testing.T, s RetentionStore) map[readpast.JobState]int64 {
	t.Helper()
	ctx := context.Background()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[readpast.JobState]int64{}
	for _, q := range st {
		counts[q.State] += q.Count
	}
	for _, state := range []readpast.JobState{readpast.StatePending, readpast.StateBlocked, readpast.StateSucceeded, readpast.StateFailed, readpast.StateCancelled} {
		listed, cursor := 0, ""
		for {
			r, err := s.List(ctx, readpast.ListParams{State: state, Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			listed += len(r.Jobs)
			if r.Next == "" {
				break
			}
			cursor = r.Next
		}
		if int64(listed) != counts[state] {
			t.Errorf("Stats counts %d %s jobs, List finds %d", counts[state], state, listed)
		}
	}
	return counts
}

// RetentionLater is a cutoff an hour ahead: every finished job is past it.
func RetentionLater() time.Time { return time.Now().Add(time.Hour) }

// testRetentionChainOfFlows: flows linked by After{JobID} edges, each after
// the last, all finished: one PruneOnce deletes all of them (promise 5:
// a chain of flows is not one flow that never ends), and a flow kept by a
// zero retention before them in id order holds none of them back.
func testRetentionChainOfFlows(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	kept := RetentionFlow(t, s, RetentionJob("a", "kq"), RetentionJob("b", "kq", readpast.After{Ref: "a"}))
	RetentionRun(t, s, "kq", kept[0].ID, false)
	RetentionRun(t, s, "kq", kept[1].ID, true) // failed: kept by a zero Failed retention
	var chain [][]*readpast.Job
	prev := int64(0)
	for range 6 {
		first := RetentionJob("a", "cq")
		if prev != 0 {
			first.After = []readpast.After{{JobID: prev}}
		}
		f := RetentionFlow(t, s, first, RetentionJob("b", "cq", readpast.After{Ref: "a"}), RetentionJob("c", "cq", readpast.After{Ref: "a"}))
		chain = append(chain, f)
		prev = f[2].ID
	}
	for _, f := range chain {
		for _, j := range f {
			RetentionRun(t, s, "cq", j.ID, false)
		}
	}
	time.Sleep(5 * time.Millisecond)
	n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if n != 3*len(chain) {
		t.Errorf("one PruneOnce deleted %d jobs, want the chain's %d", n, 3*len(chain))
	}
	for i, f := range chain {
		RetentionWant(t, s, fmt.Sprintf("flow %d of the chain", i), false, f[0].ID, f[1].ID, f[2].ID)
	}
	RetentionWant(t, s, "the flow with a failed job (Failed kept forever)", true, kept[0].ID, kept[1].ID)
	RetentionCounted(t, s)
}

// testRetentionCursor: PruneFlows with tiny limits over unripe flows around ripe
// ones: the cursor only goes up, ends at 0, and the pass deletes exactly
// the ripe flows (promise 5), however the pages cut the flows.
func testRetentionCursor(t *testing.T, s RetentionStore) {
	var ripe, unripe []int64
	for i := range 9 {
		q := "ripe"
		if i%3 != 1 {
			q = "young"
		}
		f := RetentionFlow(t, s, RetentionJob("a", q), RetentionJob("b", q, readpast.After{Ref: "a"}), RetentionJob("c", q, readpast.After{Ref: "b"}), RetentionJob("d", q, readpast.After{Ref: "a"}))
		for _, j := range f {
			if q == "ripe" {
				ripe = append(ripe, j.ID)
			} else {
				unripe = append(unripe, j.ID)
			}
		}
	}
	runQueue := func(q string, ids []int64) {
		left := append([]int64(nil), ids...)
		for len(left) > 0 {
			got, err := s.Claim(context.Background(), readpast.ClaimParams{Worker: "adv", Queues: []string{q}, Limit: 100, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatalf("queue %s: nothing to claim with %d jobs left", q, len(left))
			}
			for _, j := range got {
				if errs, err := s.Complete(context.Background(), []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil || errs[0] != nil {
					t.Fatal(err, errs)
				}
				left = slices.DeleteFunc(left, func(id int64) bool { return id == j.ID })
			}
		}
	}
	runQueue("ripe", ripe)
	time.Sleep(5 * time.Millisecond)
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	runQueue("young", unripe)
	for i, limit := range []int{1, 2, 3, 5} {
		n, calls := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: cut, Limit: limit})
		want := 0
		if i == 0 {
			want = len(ripe)
		}
		if n != want {
			t.Fatalf("limit %d: a pass deleted %d jobs in %d calls, want %d", limit, n, calls, want)
		}
	}
	RetentionWant(t, s, "ripe flows", false, ripe...)
	RetentionWant(t, s, "young flows", true, unripe...)
	RetentionCounted(t, s)
}

// testRetentionBatchMemberWithLaterLiveChild: a batch member that a later flow's
// job runs after (After{JobID}) keeps the whole batch while that job is
// live (promises 1 and 3), then all of it goes.
func testRetentionBatchMemberWithLaterLiveChild(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	fin, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "bq"}})
	if err != nil {
		t.Fatal(err)
	}
	members, err := s.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m", Queue: "bq"}, {Kind: "m", Queue: "bq"}, {Kind: "m", Queue: "bq"}})
	if err != nil {
		t.Fatal(err)
	}
	later := RetentionFlow(t, s, RetentionJob("c", "other", readpast.After{JobID: members[1].ID, Policy: readpast.RunAnyway}))
	if _, err := s.SealBatch(ctx, fin.ID); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		RetentionRun(t, s, "bq", m.ID, m.ID == members[1].ID)
	}
	RetentionRun(t, s, "bq", fin.ID, false)
	all := []int64{fin.ID, members[0].ID, members[1].ID, members[2].ID}
	cut := RetentionLater()
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: cut, Failed: cut, Cancelled: cut}); n != 0 {
		t.Errorf("deleted %d jobs while a job after a batch member is pending", n)
	}
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond, Failed: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	RetentionWant(t, s, "batch with a member whose later child is pending", true, all...)
	RetentionRun(t, s, "other", later[0].ID, false)
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater(), Failed: RetentionLater()}); n != 5 {
		t.Errorf("deleted %d jobs once all ended, want the batch's 4 and the later job", n)
	}
	RetentionWant(t, s, "batch and the later job", false, append(all, later[0].ID)...)
	RetentionCounted(t, s)
}

// testRetentionUniqueParent: a job with a unique key whose period runs, named by
// a later flow (After{JobID}), is not pruned within the period (promise
// 4), and its key still answers a duplicate.
func testRetentionUniqueParent(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	ps, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "uq", UniqueKey: "adv-key", UniqueFor: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	c := RetentionFlow(t, s, RetentionJob("c", "uq", readpast.After{JobID: p.ID}))
	RetentionRun(t, s, "uq", p.ID, false)
	RetentionRun(t, s, "uq", c[0].ID, false)
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater(), Limit: 1})
	RetentionWant(t, s, "a job within its unique key's period", true, p.ID)
	dup, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "uq", UniqueKey: "adv-key", UniqueFor: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if dup[0].ID != p.ID {
		t.Errorf("a duplicate within the key's period got job %d, want %d", dup[0].ID, p.ID)
	}
	RetentionCounted(t, s)
}

// testRetentionDiamond: a diamond a -> b, a -> c, b -> d, c -> d whose c failed
// (d runs anyway): a zero Failed retention keeps all four (promise 1),
// a Failed cutoff past it deletes all four at once, with their edges.
func testRetentionDiamond(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	f := RetentionFlow(t, s, RetentionJob("a", "dq"), RetentionJob("b", "dq", readpast.After{Ref: "a"}), RetentionJob("c", "dq", readpast.After{Ref: "a"}),
		RetentionJob("d", "dq", readpast.After{Ref: "b", Policy: readpast.RunAnyway}, readpast.After{Ref: "c", Policy: readpast.RunAnyway}))
	RetentionRun(t, s, "dq", f[0].ID, false)
	RetentionRun(t, s, "dq", f[1].ID, false)
	RetentionRun(t, s, "dq", f[2].ID, true)
	RetentionRun(t, s, "dq", f[3].ID, false)
	ids := []int64{f[0].ID, f[1].ID, f[2].ID, f[3].ID}
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater(), Cancelled: RetentionLater(), Limit: 1}); n != 0 {
		t.Errorf("deleted %d jobs of a diamond whose failed job is kept forever", n)
	}
	RetentionWant(t, s, "diamond, Failed kept", true, ids...)
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater(), Failed: RetentionLater(), Limit: 2}); n != 4 {
		t.Errorf("deleted %d jobs of a ripe diamond, want 4", n)
	}
	RetentionWant(t, s, "ripe diamond", false, ids...)
	parents, children, err := s.Relatives(ctx, f[3].ID, 10)
	if err == nil && (len(parents) > 0 || len(children) > 0) {
		t.Errorf("edges of a pruned diamond left: %d parents, %d children", len(parents), len(children))
	}
	RetentionCounted(t, s)
}

// testRetentionHeldChildInAnotherFlow: a failed parent that holds back a later
// flow's job (HoldChild, After{JobID}) is kept whatever its age
// (promise 3); once its retry has run, both go.
func testRetentionHeldChildInAnotherFlow(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	p := RetentionFlow(t, s, RetentionJob("p", "hq"), RetentionJob("q", "hq", readpast.After{Ref: "p", Policy: readpast.RunAnyway}))
	c := RetentionFlow(t, s, RetentionJob("c", "hq", readpast.After{JobID: p[0].ID, Policy: readpast.HoldChild}))
	RetentionRun(t, s, "hq", p[0].ID, true)
	RetentionRun(t, s, "hq", p[1].ID, false)
	if got, err := s.Get(ctx, c[0].ID); err != nil || got.State != readpast.StateBlocked {
		t.Fatalf("the held child: %v, %v; want blocked", got, err)
	}
	later := RetentionLater()
	RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: later, Failed: later, Cancelled: later, Limit: 1})
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond, Failed: time.Nanosecond, Cancelled: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	RetentionWant(t, s, "a failed parent holding a child blocked, and its flow", true, p[0].ID, p[1].ID, c[0].ID)
	if _, err := s.Retry(ctx, p[0].ID); err != nil {
		t.Fatal(err)
	}
	RetentionRun(t, s, "hq", p[0].ID, false)
	RetentionRun(t, s, "hq", c[0].ID, false)
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater()}); n != 3 {
		t.Errorf("deleted %d jobs once the held child ran, want 3", n)
	}
	RetentionCounted(t, s)
}

// testRetentionOddShapes: a batch with no member, a flow whose middle job an
// operator deleted, a cancelled cascade, tags: each goes when ripe and
// nothing is left behind (promise 7: counts exact, tags freed).
func testRetentionOddShapes(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	empty, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "oq"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SealBatch(ctx, empty.ID); err != nil {
		t.Fatal(err)
	}
	RetentionRun(t, s, "oq", empty.ID, false)

	tagged := RetentionJob("a", "oq")
	tagged.Job.Tags = []string{"advtag"}
	chain := RetentionFlow(t, s, tagged, RetentionJob("b", "oq", readpast.After{Ref: "a"}), RetentionJob("c", "oq", readpast.After{Ref: "b"}))
	for _, j := range chain {
		RetentionRun(t, s, "oq", j.ID, false)
	}
	if err := s.Delete(ctx, chain[1].ID); err != nil {
		t.Fatal(err)
	}

	cancelled := RetentionFlow(t, s, RetentionJob("a", "cancelq"), RetentionJob("b", "cancelq", readpast.After{Ref: "a"}), RetentionJob("c", "cancelq", readpast.After{Ref: "b"}))
	if _, err := s.Cancel(ctx, cancelled[0].ID); err != nil {
		t.Fatal(err)
	}
	for _, j := range cancelled {
		if got, err := s.Get(ctx, j.ID); err != nil || got.State != readpast.StateCancelled {
			t.Fatalf("cascade: job %d is %v, %v; want cancelled", j.ID, got, err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	RetentionWant(t, s, "the empty batch and what is left of the chain", false, empty.ID, chain[0].ID, chain[2].ID)
	RetentionWant(t, s, "the cancelled cascade (Cancelled kept)", true, cancelled[0].ID, cancelled[1].ID, cancelled[2].ID)
	r, err := s.List(ctx, readpast.ListParams{Tag: "advtag"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 0 {
		t.Errorf("the tag still lists %d pruned jobs", len(r.Jobs))
	}
	if _, err := readpast.PruneOnce(ctx, s, readpast.Retention{Cancelled: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	RetentionWant(t, s, "the cancelled cascade", false, cancelled[0].ID, cancelled[1].ID, cancelled[2].ID)
	if c := RetentionCounted(t, s); c[readpast.StateSucceeded]+c[readpast.StateCancelled] != 0 {
		t.Errorf("counts after every job was pruned: %v", c)
	}
}

// testRetentionRetriedChildInAnotherFlow (promise 3, no window): a later flow's
// job c runs after p (After{JobID}), failed, and is retried before the
// prune: p is kept while c is pending; both go once c has run.
func testRetentionRetriedChildInAnotherFlow(t *testing.T, s RetentionStore) {
	ctx := context.Background()
	p := RetentionFlow(t, s, RetentionJob("p", "rq"))[0]
	c := RetentionFlow(t, s, RetentionJob("c", "rq", readpast.After{JobID: p.ID}))[0]
	RetentionRun(t, s, "rq", p.ID, false)
	RetentionRun(t, s, "rq", c.ID, true)
	if _, err := s.Retry(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater()}); n != 0 {
		t.Errorf("deleted %d jobs while the retried child is pending", n)
	}
	RetentionWant(t, s, "a parent whose retried child is pending", true, p.ID)
	RetentionRun(t, s, "rq", c.ID, false)
	if n, _ := RetentionPruneAll(t, s, readpast.FlowPruneParams{Succeeded: RetentionLater()}); n != 2 {
		t.Errorf("deleted %d jobs once the child ran, want 2", n)
	}
	RetentionCounted(t, s)
}

func RunRetentionShapes(t *testing.T, open func(t *testing.T) RetentionStore) {
	for _, sc := range []struct {
		name string
		f    func(*testing.T, RetentionStore)
	}{
		{"ChainOfFlows", testRetentionChainOfFlows},
		{"Cursor", testRetentionCursor},
		{"BatchMemberWithLaterLiveChild", testRetentionBatchMemberWithLaterLiveChild},
		{"UniqueParent", testRetentionUniqueParent},
		{"Diamond", testRetentionDiamond},
		{"HeldChildInAnotherFlow", testRetentionHeldChildInAnotherFlow},
		{"OddShapes", testRetentionOddShapes},
		{"RetriedChildInAnotherFlow", testRetentionRetriedChildInAnotherFlow},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.f(t, open(t)) })
	}
}

// RetentionEndedBatch opens a batch of members jobs (queue mq) and runs them
// all; the last, on queue lastq, fails for good. The batch is not sealed.
func RetentionEndedBatch(t *testing.T, s RetentionStore, members int) (fin *readpast.Job, last int64) {
	t.Helper()
	ctx := context.Background()
	fin, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fq"}})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]readpast.EnqueueParams, members)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "m", Queue: "mq"}
	}
	ps[members-1] = readpast.EnqueueParams{Kind: "m", Queue: "lastq", MaxAttempts: 1}
	for i := 0; i < members; i += 1000 {
		js, err := s.AddToBatch(ctx, fin.ID, ps[i:min(i+1000, members)])
		if err != nil {
			t.Fatal(err)
		}
		last = js[len(js)-1].ID
	}
	for done := 0; done < members-1; {
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{"mq"}, Limit: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("nothing to claim with %d members left", members-1-done)
		}
		cs := make([]readpast.Completion, len(got))
		for i, j := range got {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		done += len(got)
	}
	RetentionRun(t, s, "lastq", last, true)
	return fin, last
}
