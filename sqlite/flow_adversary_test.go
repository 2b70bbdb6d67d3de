package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// Adversarial tests of the promises of flows on SQLite
// (docs/design/workflows.md, "Promises"; docs/design/sqlite.md;
// migrations/0013_flows.sql). Each test sets up a window the design names,
// or one it does not, and checks the promises at its end: no child starts
// before its parents allow it, no blocked child is stranded, every edge is
// resolved once, and Stats follows every cascade.
//
// The comparison of two cascades' costs is a timing, run only with
// -flows.cost (the default suite has no timed tests):
//
//	go test -race -run Adversary ./sqlite/
//	go test -run Adversary ./sqlite/ -flows.cost

var flowsCost = flag.Bool("flows.cost", false, "compare the cost of cancelling a flat and a two-level cascade")

// advFlow enqueues a flow and returns its jobs' ids by ref (jobs without a
// ref are left out).
func advFlow(t *testing.T, s *sqlite.Store, jobs ...readpast.FlowJob) map[string]int64 {
	t.Helper()
	out, err := s.EnqueueFlow(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for i, fj := range jobs {
		if fj.Ref != "" {
			ids[fj.Ref] = out[i].ID
		}
	}
	return ids
}

// fj is a flow job of kind and queue ref in queue q, after the given edges.
func fj(ref, q string, after ...readpast.After) readpast.FlowJob {
	return readpast.FlowJob{Ref: ref, Job: readpast.EnqueueParams{Kind: ref, Queue: q}, After: after}
}

// on is an edge to the job of ref under policy (empty: cancel_child).
func on(ref string, policy readpast.EdgePolicy) readpast.After {
	return readpast.After{Ref: ref, Policy: policy}
}

// advClaim claims exactly job id from queue q.
func advClaim(t *testing.T, s *sqlite.Store, q string, id int64) *readpast.Job {
	t.Helper()
	got, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != id {
		t.Fatalf("claimed %v from %s, want job %d", jobIDsOf(got), q, id)
	}
	return got[0]
}

// advClaimAll claims every due job of queue q.
func advClaimAll(t *testing.T, s *sqlite.Store, q string) []*readpast.Job {
	t.Helper()
	got, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// jobIDsOf lists the ids of js, sorted.
func jobIDsOf(js []*readpast.Job) []int64 {
	ids := jobIDs(js)
	sort.Slice(ids, func(i, k int) bool { return ids[i] < ids[k] })
	return ids
}

// advComplete completes the claimed jobs in one call; every entry must
// succeed.
func advComplete(t *testing.T, s *sqlite.Store, js ...*readpast.Job) {
	t.Helper()
	cs := make([]readpast.Completion, len(js))
	for i, j := range js {
		cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
	}
	errs, err := s.Complete(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("completion of job %d: %v", js[i].ID, e)
		}
	}
}

// advFailForGood fails the claimed job with no retry.
func advFailForGood(t *testing.T, s *sqlite.Store, j *readpast.Job) {
	t.Helper()
	errs, err := s.Fail(context.Background(), []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "boom", Discard: true}})
	if err != nil || errs[0] != nil {
		t.Fatalf("fail of job %d: %v %v", j.ID, errs, err)
	}
}

// advGet reads job id.
func advGet(t *testing.T, s *sqlite.Store, id int64) *readpast.Job {
	t.Helper()
	j, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return j
}

// wantStates checks the state of each job of ids (by ref).
func wantStates(t *testing.T, s *sqlite.Store, ids map[string]int64, want map[string]readpast.JobState) {
	t.Helper()
	var bad []string
	refs := make([]string, 0, len(want))
	for r := range want {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	for _, r := range refs {
		if got := advGet(t, s, ids[r]).State; got != want[r] {
			bad = append(bad, fmt.Sprintf("%s is %s, want %s", r, got, want[r]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("states: %s", strings.Join(bad, "; "))
	}
}

// wantCancelledBy checks that job ref is cancelled with one error, naming
// parent as the job whose end cancelled it.
func wantCancelledBy(t *testing.T, s *sqlite.Store, ids map[string]int64, ref, parent, how string) {
	t.Helper()
	j := advGet(t, s, ids[ref])
	want := fmt.Sprintf("parent job %d %s", ids[parent], how)
	if j.State != readpast.StateCancelled || len(j.Errors) == 0 || j.Errors[len(j.Errors)-1].Message != want {
		t.Fatalf("%s: %s with errors %+v, want cancelled with %q (%s)", ref, j.State, j.Errors, want, parent)
	}
}

// advRows runs a query returning one text column and returns its rows.
func advRows(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// advInvariants lists what breaks the promises in the stored state:
//   - a blocked job whose waiting_on differs from its unresolved edges, or
//     that no parent can release any more (each unresolved edge's parent is
//     gone, or finished without holding it);
//   - an unresolved edge into a job that is not blocked;
//   - an open edge from a finished or missing parent (its end resolved
//     nothing), a held edge from a parent that is gone;
//   - a live job marked has_children that no edge names as its parent is
//     allowed (harmless), but a parent of an unresolved edge that is live
//     and not marked is not (its end would resolve nothing).
//
// Edges from a negative parent (the seal of a batch) are left out.
func advInvariants(t *testing.T, s *sqlite.Store) []string {
	t.Helper()
	return advRows(t, s.DB(), `
SELECT printf('job %d: waiting_on %d, unresolved edges %d, releasable %d', c.id, c.waiting_on,
       (SELECT count(*) FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done'),
       EXISTS (SELECT 1 FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done'
               AND (e.parent_id < 0
                    OR EXISTS (SELECT 1 FROM readpast_jobs p WHERE p.id = e.parent_id)
                    OR (e.state = 'held' AND EXISTS (SELECT 1 FROM readpast_history h WHERE h.id = e.parent_id)))))
FROM readpast_jobs c
WHERE c.state = 'blocked' AND (
    c.waiting_on <> (SELECT count(*) FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done')
    OR NOT EXISTS (SELECT 1 FROM readpast_edges e WHERE e.child_id = c.id AND e.state <> 'done'
               AND (e.parent_id < 0
                    OR EXISTS (SELECT 1 FROM readpast_jobs p WHERE p.id = e.parent_id)
                    OR (e.state = 'held' AND EXISTS (SELECT 1 FROM readpast_history h WHERE h.id = e.parent_id)))))
UNION ALL
SELECT printf('edge %d -> %d is %s, its child is %s', e.parent_id, e.child_id, e.state,
       coalesce((SELECT state FROM readpast_jobs WHERE id = e.child_id), (SELECT state FROM readpast_history WHERE id = e.child_id), 'gone'))
FROM readpast_edges e
WHERE e.state <> 'done' AND NOT EXISTS (SELECT 1 FROM readpast_jobs j WHERE j.id = e.child_id AND j.state = 'blocked')
UNION ALL
SELECT printf('edge %d -> %d is open, its parent is %s', e.parent_id, e.child_id,
       coalesce((SELECT state FROM readpast_history WHERE id = e.parent_id), 'gone'))
FROM readpast_edges e
WHERE e.state = 'open' AND e.parent_id > 0 AND NOT EXISTS (SELECT 1 FROM readpast_jobs j WHERE j.id = e.parent_id)
UNION ALL
SELECT printf('edge %d -> %d is held, its parent is gone', e.parent_id, e.child_id)
FROM readpast_edges e
WHERE e.state = 'held' AND NOT EXISTS (SELECT 1 FROM readpast_jobs j WHERE j.id = e.parent_id)
  AND NOT EXISTS (SELECT 1 FROM readpast_history h WHERE h.id = e.parent_id)
UNION ALL
SELECT printf('job %d is a live parent of an unresolved edge, not marked has_children', p.id)
FROM readpast_jobs p
WHERE NOT p.has_children AND EXISTS (SELECT 1 FROM readpast_edges e WHERE e.parent_id = p.id AND e.state <> 'done')`)
}

// advStatsMatch lists where Stats differs from the rows stored.
func advStatsMatch(t *testing.T, s *sqlite.Store) []string {
	t.Helper()
	stats, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, st := range stats {
		got[st.Queue+"/"+string(st.State)] += st.Count
	}
	want := map[string]int64{}
	for _, row := range advRows(t, s.DB(), `SELECT queue || '/' || state || ' ' || count(*) FROM (
		SELECT queue, state FROM readpast_jobs UNION ALL SELECT queue, state FROM readpast_history) GROUP BY queue, state`) {
		var k string
		var n int64
		if _, err := fmt.Sscan(row, &k, &n); err != nil {
			t.Fatal(err)
		}
		want[k] = n
	}
	var bad []string
	for k, n := range want {
		if got[k] != n {
			bad = append(bad, fmt.Sprintf("Stats says %s is %d, the tables hold %d", k, got[k], n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok && n != 0 {
			bad = append(bad, fmt.Sprintf("Stats says %s is %d, the tables hold none", k, n))
		}
	}
	sort.Strings(bad)
	return bad
}

// advCheck fails the test when the stored state breaks a promise (see
// advInvariants) or Stats drifted from the tables.
func advCheck(t *testing.T, s *sqlite.Store, step string) {
	t.Helper()
	if bad := append(advInvariants(t, s), advStatsMatch(t, s)...); len(bad) > 0 {
		t.Fatalf("after %s: %d broken: %s", step, len(bad), strings.Join(bad, "; "))
	}
}

// advEarlyStarts lists the jobs of ids that were claimed (they are running
// or finished succeeded or failed after an attempt) although an edge into
// them did not allow it: its parent did not succeed (cancel_child,
// hold_child) or did not finish (run_anyway). Valid only where no job was
// retried by hand, which overrides the edges.
func advEarlyStarts(t *testing.T, s *sqlite.Store) []string {
	t.Helper()
	return advRows(t, s.DB(), `
WITH started(id) AS (
    SELECT id FROM readpast_jobs WHERE state = 'running'
    UNION ALL SELECT id FROM readpast_history WHERE attempt > 0),
ends(id, state) AS (SELECT id, state FROM readpast_history)
SELECT printf('job %d started with edge from %d (%s) whose parent is %s', e.child_id, e.parent_id, e.policy,
       coalesce((SELECT state FROM readpast_jobs WHERE id = e.parent_id), (SELECT state FROM ends WHERE id = e.parent_id), 'gone'))
FROM readpast_edges e JOIN started ON started.id = e.child_id
WHERE e.parent_id > 0 AND NOT (
    (SELECT state FROM ends WHERE id = e.parent_id) IS 'succeeded'
    OR (e.policy = 'run_anyway' AND EXISTS (SELECT 1 FROM ends WHERE id = e.parent_id)))`)
}

// TestFlowAdversaryBulkCompleteOfSharedParents: the parents of shared
// children complete in one Complete call, so one DELETE statement fires
// their triggers one after the other. Each edge takes exactly one off its
// child: children waiting for all of them are released once, a child
// waiting for one more parent stays blocked with a counter of 1, and a
// repeated entry in the batch changes nothing more.
func TestFlowAdversaryBulkCompleteOfSharedParents(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("p1", "par"), fj("p2", "par"), fj("p3", "par"), fj("p4", "late"),
		fj("both", "kids", on("p1", ""), on("p2", "")),
		fj("anyway", "kids", on("p1", readpast.RunAnyway), on("p2", readpast.RunAnyway), on("p3", readpast.HoldChild)),
		fj("one", "kids", on("p2", "")),
		fj("waits", "kids", on("p1", ""), on("p2", ""), on("p3", ""), on("p4", "")),
	)
	ps := advClaimAll(t, s, "par")
	if len(ps) != 3 {
		t.Fatalf("claimed %d parents, want 3", len(ps))
	}
	// All three in one call, with a repeated entry.
	cs := []readpast.Completion{}
	for _, p := range ps {
		cs = append(cs, readpast.Completion{ID: p.ID, Token: p.Token})
	}
	cs = append(cs, cs[0])
	errs, err := s.Complete(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("entry %d: %v", i, e)
		}
	}
	wantStates(t, s, ids, map[string]readpast.JobState{
		"both": readpast.StatePending, "anyway": readpast.StatePending, "one": readpast.StatePending, "waits": readpast.StateBlocked,
	})
	var waiting int
	if err := s.DB().QueryRow(`SELECT waiting_on FROM readpast_jobs WHERE id = ?`, ids["waits"]).Scan(&waiting); err != nil || waiting != 1 {
		t.Fatalf("waits: waiting_on %d (%v), want 1 (p4 left)", waiting, err)
	}
	advCheck(t, s, "the bulk completion")
	if got := advClaimAll(t, s, "kids"); len(got) != 3 {
		t.Fatalf("claimed %v from kids, want the 3 released", jobIDsOf(got))
	}
	advComplete(t, s, advClaim(t, s, "late", ids["p4"]))
	advClaim(t, s, "kids", ids["waits"])
	if bad := advEarlyStarts(t, s); len(bad) > 0 {
		t.Fatal(bad)
	}
	advCheck(t, s, "the last parent")
}

// TestFlowAdversaryDiamondCancel: a cancellation reaches jobs by several
// paths at once. x -> a, x -> b; g after a and b (cancel_child: reached
// twice); h after g; m after a (cancel_child) and b (run_anyway: still
// cancelled); r after a and b (run_anyway: released once, its counter
// down by two); k after g (hold_child) and a job outside the cascade
// (held, not cancelled). Every job below is cancelled once, r released,
// and the counts follow.
func TestFlowAdversaryDiamondCancel(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("x", "d"), fj("out", "o"),
		fj("a", "d", on("x", "")), fj("b", "d", on("x", "")),
		fj("g", "d", on("a", ""), on("b", "")),
		fj("h", "d", on("g", "")),
		fj("m", "d", on("a", ""), on("b", readpast.RunAnyway)),
		fj("r", "r", on("a", readpast.RunAnyway), on("b", readpast.RunAnyway)),
		fj("k", "k", on("g", readpast.HoldChild), on("out", "")),
	)
	advCheck(t, s, "the flow")
	if _, err := s.Cancel(ctx, ids["x"]); err != nil {
		t.Fatal(err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{
		"a": readpast.StateCancelled, "b": readpast.StateCancelled, "g": readpast.StateCancelled, "h": readpast.StateCancelled,
		"m": readpast.StateCancelled, "r": readpast.StatePending, "k": readpast.StateBlocked, "out": readpast.StatePending,
	})
	for _, r := range []string{"a", "b"} {
		wantCancelledBy(t, s, ids, r, "x", "was cancelled")
	}
	wantCancelledBy(t, s, ids, "h", "g", "was cancelled")
	for _, r := range []string{"g", "m", "h"} {
		if n := len(advGet(t, s, ids[r]).Errors); n != 1 {
			t.Fatalf("%s has %d errors, want 1", r, n)
		}
	}
	advCheck(t, s, "the cancellation")
	advClaim(t, s, "r", ids["r"])
	// out completes: k still waits for g, which holds it.
	advComplete(t, s, advClaim(t, s, "o", ids["out"]))
	wantStates(t, s, ids, map[string]readpast.JobState{"k": readpast.StateBlocked})
	if err := s.Delete(ctx, ids["g"]); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("delete of g, which holds k: %v", err)
	}
	// g, retried by hand, succeeds: k is released.
	if _, err := s.Retry(ctx, ids["g"]); err != nil {
		t.Fatal(err)
	}
	advComplete(t, s, advClaim(t, s, "d", ids["g"]))
	wantStates(t, s, ids, map[string]readpast.JobState{"k": readpast.StatePending, "h": readpast.StateCancelled})
	advClaim(t, s, "k", ids["k"])
	advCheck(t, s, "g retried")
}

// TestFlowAdversaryHoldThenRetriedParent: p fails for good (by Fail, and
// by a lease rescued with no attempts left) holding h; p is retried, fails
// again (h still held, p still kept), is named by id by a new flow while
// live, is retried again and succeeds: h and the new child are released,
// once each.
func TestFlowAdversaryHoldThenRetriedParent(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"fail", "rescue"} {
		t.Run(how, func(t *testing.T) {
			s := openTemp(t)
			ids := advFlow(t, s,
				readpast.FlowJob{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "p", MaxAttempts: 1}},
				fj("q", "q"),
				fj("h", "h", on("p", readpast.HoldChild)),
				fj("hq", "h", on("p", readpast.HoldChild), on("q", "")),
			)
			end := func() {
				t.Helper()
				if how == "fail" {
					advFailForGood(t, s, advClaim(t, s, "p", ids["p"]))
					return
				}
				if _, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"p"}, Worker: "w", Lease: time.Millisecond}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
				if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
					t.Fatalf("rescued %d, %v", n, err)
				}
			}
			end()
			wantStates(t, s, ids, map[string]readpast.JobState{"p": readpast.StateFailed, "h": readpast.StateBlocked, "hq": readpast.StateBlocked})
			advCheck(t, s, "p failed")
			// q succeeds meanwhile: hq waits for p alone.
			advComplete(t, s, advClaim(t, s, "q", ids["q"]))
			if n, err := s.Prune(ctx, readpast.PruneParams{State: readpast.StateFailed, Before: time.Now().Add(time.Hour)}); err != nil || n != 0 {
				t.Fatalf("prune of failed: %d, %v; want p kept", n, err)
			}
			if _, err := s.Retry(ctx, ids["p"]); err != nil {
				t.Fatal(err)
			}
			advCheck(t, s, "p retried")
			end()
			wantStates(t, s, ids, map[string]readpast.JobState{"p": readpast.StateFailed, "h": readpast.StateBlocked, "hq": readpast.StateBlocked})
			advCheck(t, s, "p failed again")
			if _, err := s.Retry(ctx, ids["p"]); err != nil {
				t.Fatal(err)
			}
			later, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "later", Queue: "h"},
				After: []readpast.After{{JobID: ids["p"]}}}})
			if err != nil {
				t.Fatal(err)
			}
			advComplete(t, s, advClaim(t, s, "p", ids["p"]))
			wantStates(t, s, ids, map[string]readpast.JobState{"h": readpast.StatePending, "hq": readpast.StatePending})
			if got := advGet(t, s, later[0].ID).State; got != readpast.StatePending {
				t.Fatalf("the later child is %s", got)
			}
			if got := advClaimAll(t, s, "h"); len(got) != 3 {
				t.Fatalf("claimed %v, want h, hq and the later child", jobIDsOf(got))
			}
			if bad := advEarlyStarts(t, s); len(bad) > 0 {
				t.Fatal(bad)
			}
			advCheck(t, s, "p succeeded")
			if err := s.Delete(ctx, ids["p"]); err != nil {
				t.Fatalf("delete of p once it holds nothing: %v", err)
			}
			advCheck(t, s, "p deleted")
		})
	}
}

// TestFlowAdversaryRunAnywayWithCancelChild: one child runs after a
// (run_anyway) and b (cancel_child), in every order of their ends, and
// with both ending in one statement.
func TestFlowAdversaryRunAnywayWithCancelChild(t *testing.T) {
	ctx := context.Background()
	type step struct{ who, how string } // how: ok, fail, cancel
	for _, c := range []struct {
		name  string
		steps []step
		want  readpast.JobState
		by    string // the parent the cancellation names
	}{
		{"a fails, b succeeds", []step{{"a", "fail"}, {"b", "ok"}}, readpast.StatePending, ""},
		{"b succeeds, a fails", []step{{"b", "ok"}, {"a", "fail"}}, readpast.StatePending, ""},
		{"a cancelled, b fails", []step{{"a", "cancel"}, {"b", "fail"}}, readpast.StateCancelled, "b"},
		{"b cancelled, a succeeds", []step{{"b", "cancel"}, {"a", "ok"}}, readpast.StateCancelled, "b"},
		{"a succeeds, b cancelled", []step{{"a", "ok"}, {"b", "cancel"}}, readpast.StateCancelled, "b"},
		{"both succeed at once", []step{{"ab", "ok"}}, readpast.StatePending, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openTemp(t)
			ids := advFlow(t, s, fj("a", "a"), fj("b", "b"), fj("c", "c", on("a", readpast.RunAnyway), on("b", "")))
			for _, st := range c.steps {
				switch {
				case st.who == "ab":
					advComplete(t, s, advClaim(t, s, "a", ids["a"]), advClaim(t, s, "b", ids["b"]))
				case st.how == "ok":
					advComplete(t, s, advClaim(t, s, st.who, ids[st.who]))
				case st.how == "fail":
					advFailForGood(t, s, advClaim(t, s, st.who, ids[st.who]))
				case st.how == "cancel":
					if _, err := s.Cancel(ctx, ids[st.who]); err != nil {
						t.Fatal(err)
					}
				}
				advCheck(t, s, st.who+" "+st.how)
			}
			wantStates(t, s, ids, map[string]readpast.JobState{"c": c.want})
			if c.by != "" {
				how := "was cancelled"
				if c.steps[len(c.steps)-1].how == "fail" && c.steps[len(c.steps)-1].who == c.by {
					how = "failed"
				}
				wantCancelledBy(t, s, ids, "c", c.by, how)
			} else {
				advClaim(t, s, "c", ids["c"])
			}
			if bad := advEarlyStarts(t, s); len(bad) > 0 {
				t.Fatal(bad)
			}
		})
	}
}

// TestFlowAdversaryHoldingParentsKept: a finished parent that holds a
// blocked child (directly, or as a job its cascade cancelled) is kept by
// Delete, BulkDelete and Prune; once the child is cancelled it holds
// nothing and goes, with its edges.
func TestFlowAdversaryHoldingParentsKept(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("x", "x"), fj("p", "p"),
		fj("a", "x", on("x", "")),
		fj("ha", "held", on("a", readpast.HoldChild)),
		fj("hp", "held", on("p", readpast.HoldChild)),
	)
	if _, err := s.Cancel(ctx, ids["x"]); err != nil { // a cancelled by the cascade, holding ha
		t.Fatal(err)
	}
	advFailForGood(t, s, advClaim(t, s, "p", ids["p"]))
	wantStates(t, s, ids, map[string]readpast.JobState{"a": readpast.StateCancelled, "ha": readpast.StateBlocked, "hp": readpast.StateBlocked})
	advCheck(t, s, "the ends")
	for _, r := range []string{"a", "p"} {
		if err := s.Delete(ctx, ids[r]); !errors.Is(err, readpast.ErrInvalidState) {
			t.Fatalf("delete of %s, which holds a child: %v", r, err)
		}
	}
	if n, err := s.BulkDelete(ctx, readpast.JobFilter{Queue: "x"}); err != nil || n != 1 {
		t.Fatalf("bulk delete of queue x: %d, %v; want x alone", n, err)
	}
	if n, err := s.BulkDelete(ctx, readpast.JobFilter{Queue: "p"}); err != nil || n != 0 {
		t.Fatalf("bulk delete of queue p: %d, %v; want none", n, err)
	}
	for _, st := range []readpast.JobState{readpast.StateCancelled, readpast.StateFailed} {
		if n, err := s.Prune(ctx, readpast.PruneParams{State: st, Before: time.Now().Add(time.Hour)}); err != nil || n != 0 {
			t.Fatalf("prune of %s: %d, %v; want none", st, n, err)
		}
	}
	advCheck(t, s, "the refused deletes")
	// a, retried, succeeds: ha is released; hp is cancelled by hand, p
	// holds nothing any more.
	if _, err := s.Retry(ctx, ids["a"]); err != nil {
		t.Fatal(err)
	}
	advComplete(t, s, advClaim(t, s, "x", ids["a"]))
	if _, err := s.Cancel(ctx, ids["hp"]); err != nil {
		t.Fatal(err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"ha": readpast.StatePending, "hp": readpast.StateCancelled})
	// p holds nothing now, and its flow (p and hp: x, which joined a to
	// it, is gone) has ended: both go. a's, with ha pending, stays.
	if n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond, Failed: time.Nanosecond, Cancelled: time.Nanosecond}); err != nil || n != 2 {
		t.Fatalf("prune once p holds nothing: %d, %v; want p and hp", n, err)
	}
	if err := s.Delete(ctx, ids["a"]); err != nil {
		t.Fatalf("delete of a once it succeeded: %v", err)
	}
	advCheck(t, s, "the prune")
	// x, p and a are gone, and with them every edge.
	if n := countRows(t, s, "readpast_edges"); n != 0 {
		t.Fatalf("%d edges left once every parent is gone, want 0", n)
	}
}

// TestFlowAdversaryBlockedJobByHand: a blocked job refuses Retry, RunNow
// and CancelPending (ErrInvalidState naming blocked) and BulkRetry passes
// it over; cancelled by hand and retried it runs at once, and its
// parents' later ends (success, failure, cancellation) leave it alone.
func TestFlowAdversaryBlockedJobByHand(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("p1", "p"), fj("p2", "p"), fj("p3", "p"),
		fj("c", "c", on("p1", ""), on("p2", readpast.RunAnyway), on("p3", readpast.HoldChild)),
		fj("gc", "g", on("c", "")),
	)
	for name, call := range map[string]func(context.Context, int64) (*readpast.Job, error){
		"Retry": s.Retry, "RunNow": s.RunNow, "CancelPending": s.CancelPending,
	} {
		if _, err := call(ctx, ids["c"]); !errors.Is(err, readpast.ErrInvalidState) || !strings.Contains(err.Error(), "blocked") {
			t.Fatalf("%s of a blocked job: %v, want ErrInvalidState naming blocked", name, err)
		}
	}
	if n, err := s.BulkRetry(ctx, readpast.JobFilter{Queue: "c"}); err != nil || n != 0 {
		t.Fatalf("bulk retry: %d, %v", n, err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"c": readpast.StateBlocked, "gc": readpast.StateBlocked})
	// Cancelled by hand: gc follows its edge; retried, c runs at once.
	if _, err := s.Cancel(ctx, ids["c"]); err != nil {
		t.Fatal(err)
	}
	wantCancelledBy(t, s, ids, "gc", "c", "was cancelled")
	advCheck(t, s, "c cancelled")
	if _, err := s.Retry(ctx, ids["c"]); err != nil {
		t.Fatal(err)
	}
	if got := advGet(t, s, ids["c"]); got.State != readpast.StatePending {
		t.Fatalf("c retried is %s", got.State)
	}
	advCheck(t, s, "c retried")
	// Its former parents end every way; c stays pending, untouched.
	advComplete(t, s, advClaim(t, s, "p", ids["p1"]))
	advFailForGood(t, s, advClaim(t, s, "p", ids["p2"]))
	if _, err := s.Cancel(ctx, ids["p3"]); err != nil {
		t.Fatal(err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"c": readpast.StatePending, "gc": readpast.StateCancelled})
	advCheck(t, s, "c's parents ended")
	// p3 holds nothing: c left the live table's blocked state by hand.
	if err := s.Delete(ctx, ids["p3"]); err != nil {
		t.Fatalf("delete of p3: %v", err)
	}
	advClaim(t, s, "c", ids["c"])
}

// TestFlowAdversaryStaleCompletionAfterRescue: a parent's lease is
// rescued (attempts left), its stale attempt completes: nothing is
// released. Claimed again, it is rescued with no attempts left: it failed,
// its children follow their policies, and stale completions of either
// attempt change nothing.
func TestFlowAdversaryStaleCompletionAfterRescue(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		readpast.FlowJob{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "p", MaxAttempts: 2}},
		fj("cancel", "c", on("p", "")),
		fj("anyway", "c", on("p", readpast.RunAnyway)),
		fj("hold", "c", on("p", readpast.HoldChild)),
	)
	claimShort := func() *readpast.Job {
		t.Helper()
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"p"}, Worker: "w", Lease: time.Millisecond})
		if err != nil || len(got) != 1 || got[0].ID != ids["p"] {
			t.Fatalf("claim of p: %v, %v", jobIDsOf(got), err)
		}
		time.Sleep(5 * time.Millisecond)
		if n, err := s.RescueExpired(ctx, 10); err != nil || n != 1 {
			t.Fatalf("rescued %d, %v", n, err)
		}
		return got[0]
	}
	first := claimShort()
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: first.ID, Token: first.Token}})
	if err != nil || !errors.Is(errs[0], readpast.ErrStaleToken) {
		t.Fatalf("stale completion: %v, %v", errs, err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"p": readpast.StatePending, "cancel": readpast.StateBlocked,
		"anyway": readpast.StateBlocked, "hold": readpast.StateBlocked})
	second := claimShort()
	wantStates(t, s, ids, map[string]readpast.JobState{"p": readpast.StateFailed, "cancel": readpast.StateCancelled,
		"anyway": readpast.StatePending, "hold": readpast.StateBlocked})
	wantCancelledBy(t, s, ids, "cancel", "p", "failed")
	for _, j := range []*readpast.Job{first, second} {
		errs, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
		if err != nil || !errors.Is(errs[0], readpast.ErrStaleToken) {
			t.Fatalf("stale completion after the final rescue: %v, %v", errs, err)
		}
		if errs, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "late"}}); err != nil || !errors.Is(errs[0], readpast.ErrStaleToken) {
			t.Fatalf("stale failure after the final rescue: %v, %v", errs, err)
		}
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"hold": readpast.StateBlocked, "anyway": readpast.StatePending})
	advCheck(t, s, "the stale attempts")
	// A cancellation while its completion is in flight: the completion
	// arrives after it and is stale.
	ids2 := advFlow(t, s, fj("q", "q"), fj("qc", "qc", on("q", "")))
	qj := advClaim(t, s, "q", ids2["q"])
	if _, err := s.Cancel(ctx, ids2["q"]); err != nil {
		t.Fatal(err)
	}
	errs, err = s.Complete(ctx, []readpast.Completion{{ID: qj.ID, Token: qj.Token}})
	if err != nil || !errors.Is(errs[0], readpast.ErrStaleToken) {
		t.Fatalf("completion after the cancel: %v, %v", errs, err)
	}
	wantStates(t, s, ids2, map[string]readpast.JobState{"q": readpast.StateCancelled, "qc": readpast.StateCancelled})
	if bad := advEarlyStarts(t, s); len(bad) > 0 {
		t.Fatal(bad)
	}
	advCheck(t, s, "the cancel in flight")
}

// TestFlowAdversaryCompleteInARolledBackTransaction: a parent completed
// in the caller's transaction releases its child only if that commits.
func TestFlowAdversaryCompleteInARolledBackTransaction(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s, fj("p", "p"), fj("c", "c", on("p", "")))
	pj := advClaim(t, s, "p", ids["p"])
	for _, commit := range []bool{false, true} {
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: pj.ID, Token: pj.Token}); err != nil {
			t.Fatal(err)
		}
		var inTx string
		if err := tx.QueryRow(`SELECT state FROM readpast_jobs WHERE id = ?`, ids["c"]).Scan(&inTx); err != nil || inTx != "pending" {
			t.Fatalf("the child inside the transaction: %q, %v", inTx, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]readpast.JobState{false: readpast.StateBlocked, true: readpast.StatePending}[commit]
		wantStates(t, s, ids, map[string]readpast.JobState{"c": want})
		advCheck(t, s, fmt.Sprintf("commit %v", commit))
	}
	advClaim(t, s, "c", ids["c"])
}

// TestFlowAdversaryBlockedMiddleCancelledByHand: a blocked job that is
// also a parent is cancelled by hand: both its triggers run (it is a child
// leaving while blocked, and a parent ending). Its own parents' edges are
// resolved as nothing, its children follow theirs, and its parents' later
// failure cancels nothing twice.
func TestFlowAdversaryBlockedMiddleCancelledByHand(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("top", "t"), fj("top2", "t"),
		fj("mid", "m", on("top", ""), on("top2", readpast.HoldChild)),
		fj("c", "m", on("mid", "")),
		fj("r", "r", on("mid", readpast.RunAnyway), on("top", readpast.RunAnyway)),
		fj("h", "h", on("mid", readpast.HoldChild)),
	)
	if _, err := s.Cancel(ctx, ids["mid"]); err != nil {
		t.Fatal(err)
	}
	wantCancelledBy(t, s, ids, "c", "mid", "was cancelled")
	wantStates(t, s, ids, map[string]readpast.JobState{"r": readpast.StateBlocked, "h": readpast.StateBlocked})
	advCheck(t, s, "mid cancelled")
	advFailForGood(t, s, advClaim(t, s, "t", ids["top"]))
	wantStates(t, s, ids, map[string]readpast.JobState{"r": readpast.StatePending})
	advFailForGood(t, s, advClaim(t, s, "t", ids["top2"]))
	advCheck(t, s, "the tops failed")
	// top2 holds nothing (mid left by hand); mid holds h.
	if err := s.Delete(ctx, ids["top2"]); err != nil {
		t.Fatalf("delete of top2: %v", err)
	}
	if err := s.Delete(ctx, ids["mid"]); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("delete of mid, which holds h: %v", err)
	}
	if bad := advEarlyStarts(t, s); len(bad) > 0 {
		t.Fatal(bad)
	}
}

// TestFlowAdversaryReleasedGroupedChildren: a grouped child released by
// its parent's success, or by a cancellation's run_anyway edge, gets its
// ready mark: it is claimable at once when its group has a free slot, and
// once a slot frees when it has none; one released into a paused queue is
// claimable once the queue resumes.
func TestFlowAdversaryReleasedGroupedChildren(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if err := s.SetGroupLimit(ctx, "G", 1); err != nil {
		t.Fatal(err)
	}
	grouped := func(ref, q string, after ...readpast.After) readpast.FlowJob {
		j := fj(ref, q, after...)
		j.Job.Group = "G"
		if q == "paused" {
			j.Job.Group = "G2" // its own group: G's head is never in a paused queue
		}
		return j
	}
	ids := advFlow(t, s,
		fj("p", "p"), fj("x", "p"),
		grouped("c", "g", on("p", "")),
		grouped("r", "g", on("x", readpast.RunAnyway)),
		grouped("busy", "busy"),
		grouped("paused", "paused", on("p", "")),
	)
	busy := advClaim(t, s, "busy", ids["busy"]) // G is full
	if err := s.PauseQueue(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	advComplete(t, s, advClaim(t, s, "p", ids["p"]))
	if _, err := s.Cancel(ctx, ids["x"]); err != nil {
		t.Fatal(err)
	}
	wantStates(t, s, ids, map[string]readpast.JobState{"c": readpast.StatePending, "r": readpast.StatePending, "paused": readpast.StatePending})
	if got := advClaimAll(t, s, "g"); len(got) != 0 {
		t.Fatalf("claimed %v while G is full", jobIDsOf(got))
	}
	advComplete(t, s, busy)
	c := advClaimAll(t, s, "g")
	if len(c) != 1 {
		t.Fatalf("claimed %v once G freed, want one of c and r", jobIDsOf(c))
	}
	advComplete(t, s, c...)
	c2 := advClaimAll(t, s, "g")
	if len(c2) != 1 || c2[0].ID == c[0].ID {
		t.Fatalf("claimed %v after, want the other of c and r", jobIDsOf(c2))
	}
	advComplete(t, s, c2...)
	if err := s.ResumeQueue(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	advClaim(t, s, "paused", ids["paused"])
	advCheck(t, s, "the grouped children")
}

// TestFlowAdversaryBulkCancelCounts: a bulk cancel counts the jobs it
// cancelled itself, not the children their cancellation cancelled before
// the walk reached them; a child listed before its parent (a smaller id)
// is reached first and counted. Nothing is cancelled twice.
func TestFlowAdversaryBulkCancelCounts(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	// Parent before child: 1 counted of 3 cancelled (a chain).
	advFlow(t, s, fj("a", "one"), fj("b", "one", on("a", "")), fj("c", "one", on("b", "")))
	// Child before parent: each is reached by the walk first.
	advFlow(t, s, fj("c", "two", on("b", "")), fj("b", "two", on("a", "")), fj("a", "two"))
	// A run_anyway child, released mid-batch by its parent's cancellation.
	anyway := advFlow(t, s, fj("a", "three"), fj("r", "three", on("a", readpast.RunAnyway)))
	for q, want := range map[string]int{"one": 1, "two": 3, "three": 2} {
		n, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: q})
		if err != nil || n != want {
			t.Fatalf("bulk cancel of %s: %d, %v; want %d", q, n, err, want)
		}
	}
	if got := advGet(t, s, anyway["r"]); got.State != readpast.StateCancelled || len(got.Errors) != 0 {
		t.Fatalf("r: %s %+v, want cancelled by the bulk cancel itself", got.State, got.Errors)
	}
	var cancelled int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_history WHERE state = 'cancelled'`).Scan(&cancelled); err != nil || cancelled != 8 {
		t.Fatalf("%d cancelled, %v; want 8", cancelled, err)
	}
	advCheck(t, s, "the bulk cancels")
}

// TestFlowAdversaryTwoStoresRacing: two sqlite.Store instances on one
// file (as two processes would), each with claimers that complete, fail
// or snooze what they claim, while a third goroutine cancels jobs and
// bulk-cancels queues. Flows of fan-ins, diamonds and chains with every
// policy. At the end: nothing started before its edges allowed, nothing
// stranded, Stats equal to the tables, and every job finished.
func TestFlowAdversaryTwoStoresRacing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "readpast.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	flows := 40
	if raceEnabled {
		flows = 8
	}
	policies := []readpast.EdgePolicy{readpast.CancelChild, readpast.RunAnyway, readpast.HoldChild}
	rng := rand.New(rand.NewPCG(33, 1))
	queues := []string{"q0", "q1", "q2"}
	for f := range flows {
		var jobs []readpast.FlowJob
		for i := range 12 {
			j := readpast.FlowJob{Ref: fmt.Sprint("j", i), Job: readpast.EnqueueParams{Kind: "k", Queue: queues[rng.IntN(len(queues))], MaxAttempts: 2}}
			if rng.IntN(3) == 0 {
				j.Job.Group = fmt.Sprint("g", rng.IntN(3))
			}
			// Up to three parents among the earlier jobs: fan-ins and
			// diamonds.
			seen := map[int]bool{}
			for range rng.IntN(4) {
				if i == 0 {
					break
				}
				p := rng.IntN(i)
				if seen[p] {
					continue
				}
				seen[p] = true
				j.After = append(j.After, readpast.After{Ref: fmt.Sprint("j", p), Policy: policies[rng.IntN(len(policies))]})
			}
			jobs = append(jobs, j)
		}
		if _, err := stores[f%2].EnqueueFlow(ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 4 {
		s := stores[w%2]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			idle := 0
			for runCtx.Err() == nil && idle < 40 {
				got, err := s.Claim(runCtx, readpast.ClaimParams{Queues: queues, Worker: fmt.Sprint("w", w), Limit: 3, Lease: time.Minute})
				if err != nil {
					if runCtx.Err() == nil {
						errc <- fmt.Errorf("claim: %w", err)
					}
					return
				}
				if len(got) == 0 {
					idle++
					time.Sleep(2 * time.Millisecond)
					continue
				}
				idle = 0
				var cs []readpast.Completion
				for _, j := range got {
					switch r.IntN(10) {
					case 0:
						if _, err := s.Fail(runCtx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x"}}); err != nil {
							errc <- err
							return
						}
					case 1:
						// The canceller may have ended the attempt: its
						// token is then stale, and the snooze says so.
						if err := s.Snooze(runCtx, j.ID, j.Token, time.Millisecond); err != nil && !errors.Is(err, readpast.ErrStaleToken) {
							errc <- err
							return
						}
					default:
						cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
					}
				}
				if _, err := s.Complete(runCtx, cs); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	// The canceller: a live job chosen at random (blocked, pending or
	// running) every few milliseconds while the claimers work, and now and
	// then a bulk cancel of one group of one queue.
	claimersDone := make(chan struct{})
	var cwg sync.WaitGroup
	cwg.Go(func() {
		r := rand.New(rand.NewPCG(9, 9))
		for i := 0; i < flows; i++ {
			select {
			case <-claimersDone:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s := stores[i%2]
			if i%10 == 9 {
				if _, err := s.BulkCancel(runCtx, readpast.JobFilter{Queue: queues[r.IntN(len(queues))], Group: "g1"}); err != nil {
					errc <- err
					return
				}
				continue
			}
			var id int64
			err := s.DB().QueryRowContext(runCtx, `SELECT id FROM readpast_jobs ORDER BY random() LIMIT 1`).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return
			}
			if err != nil {
				errc <- err
				return
			}
			if _, err := s.Cancel(runCtx, id); err != nil && !errors.Is(err, readpast.ErrInvalidState) && !errors.Is(err, readpast.ErrNotFound) {
				errc <- err
				return
			}
		}
	})
	wg.Wait()
	close(claimersDone)
	cwg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if runCtx.Err() != nil {
		t.Fatal("the claimers did not finish in time")
	}
	t.Logf("after the race: %v (children claimed: %v)",
		advRows(t, stores[0].DB(), `SELECT state || '=' || count(*) FROM (SELECT state FROM readpast_jobs UNION ALL SELECT state FROM readpast_history) GROUP BY state ORDER BY state`),
		advRows(t, stores[0].DB(), `SELECT count(DISTINCT e.child_id) FROM readpast_edges e JOIN readpast_history h ON h.id = e.child_id WHERE h.attempt > 0`))
	for _, s := range stores {
		if bad := advEarlyStarts(t, s); len(bad) > 0 {
			t.Fatalf("%d early starts, first: %s", len(bad), bad[0])
		}
		advCheck(t, s, "the race")
	}
	// What is left blocked is held by a finished parent; cancelling it
	// ends every flow.
	if _, err := stores[0].BulkCancel(ctx, readpast.JobFilter{State: readpast.StateBlocked, Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	var live int
	if err := stores[1].DB().QueryRow(`SELECT count(*) FROM readpast_jobs`).Scan(&live); err != nil || live != 0 {
		t.Fatalf("%d live jobs after the race and the final cancel, %v", live, err)
	}
	advCheck(t, stores[1], "the final cancel")
}

// TestFlowAdversaryCascadeNamesTheTopmostParent: "A job with several
// cancelled parents names the topmost one it has as a direct parent"
// (docs/design/workflows.md). x -> a -> b -> c and a -> c, with b listed
// before a in its flow (so b's id is the smaller): c's direct parents a
// and b are both cancelled by x's cancellation, a is the topmost, and
// PostgreSQL's cascade, one level per trigger, names a. SQLite names the
// parent of smallest id, b.
func TestFlowAdversaryCascadeNamesTheTopmostParent(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	ids := advFlow(t, s,
		fj("x", "n"),
		fj("b", "n", on("a", "")),
		fj("a", "n", on("x", "")),
		fj("c", "n", on("a", ""), on("b", "")),
	)
	if ids["b"] >= ids["a"] {
		t.Fatalf("b %d, a %d: the setup needs b's id below a's", ids["b"], ids["a"])
	}
	if _, err := s.Cancel(ctx, ids["x"]); err != nil {
		t.Fatal(err)
	}
	wantCancelledBy(t, s, ids, "c", "a", "was cancelled")
}

// TestFlowAdversaryRefusedFlowInTxMarksNoParent: "Only once every named
// parent is found live does the flow mark them (has_children); a refused
// flow marks none" (docs/design/workflows.md). A flow in the caller's
// transaction names a live job at the bottom of a chain as deep as
// allowed: it is refused (too deep) after checkParents marked the live
// parent, and the caller, handling the *FieldError as it would one of
// NormalizeFlow's, commits its transaction: the parent is left marked
// with no edge naming it.
func TestFlowAdversaryRefusedFlowInTxMarksNoParent(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	chain, err := s.EnqueueFlow(ctx, chainFlow("deep", readpast.MaxFlowDepth+1))
	if err != nil {
		t.Fatal(err)
	}
	last := chain[len(chain)-1].ID
	var before bool
	if err := s.DB().QueryRow(`SELECT has_children FROM readpast_jobs WHERE id = ?`, last).Scan(&before); err != nil || before {
		t.Fatalf("the chain's last is marked before any flow names it: %v, %v", before, err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k"}, After: []readpast.After{{JobID: last}}}})
	var fe *readpast.FieldError
	if !errors.As(err, &fe) {
		tx.Rollback()
		t.Fatalf("a flow too deep: %v, want a *FieldError", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var marked bool
	if err := s.DB().QueryRow(`SELECT has_children FROM readpast_jobs WHERE id = ?`, last).Scan(&marked); err != nil {
		t.Fatal(err)
	}
	if marked {
		t.Errorf("job %d is marked has_children by a refused flow; no edge names it", last)
	}
}

// TestFlowAdversaryWideCascadeCostIsLinear: the cancellation of a parent
// cancels its whole cascade in one trigger pass, in the single writer's
// transaction, so every other write of every process waits for it. Two
// cascades of the same size: 2n direct children, and n children with a
// child each. Their cost should be of the same order; the message of each
// cancelled grandchild re-runs the recursive query of the whole cascade
// (x.parent_id IN (SELECT id FROM d), correlated per row), so the second
// grows with the square of the cascade: with n = 2,000 (4,000 jobs
// cancelled), seconds to tens of seconds against a tenth of one, while a
// claim of any other queue waits. Schema version 15 reads each cancelled
// job's parent once for the whole cascade.
func TestFlowAdversaryWideCascadeCostIsLinear(t *testing.T) {
	if !*flowsCost {
		t.Skip("a timing comparison; run with -flows.cost")
	}
	ctx := context.Background()
	n := 2000
	cancelTime := func(grandchildren bool) time.Duration {
		t.Helper()
		s := openTemp(t)
		x, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		for done := 0; done < 2*n; done += readpast.MaxFlowJobs {
			var jobs []readpast.FlowJob
			for i := 0; i < readpast.MaxFlowJobs/2; i++ {
				r := fmt.Sprint("a", i)
				child := readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "b"}, After: []readpast.After{{JobID: x[0].ID}}}
				if grandchildren {
					child.After = []readpast.After{{Ref: r}}
				}
				jobs = append(jobs, readpast.FlowJob{Ref: r, Job: readpast.EnqueueParams{Kind: "a"}, After: []readpast.After{{JobID: x[0].ID}}}, child)
			}
			if _, err := s.EnqueueFlow(ctx, jobs); err != nil {
				t.Fatal(err)
			}
		}
		// A claim of another queue, started with the cancellation, waits
		// for the writer.
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "o", Queue: "other"}}); err != nil {
			t.Fatal(err)
		}
		claimed := make(chan time.Time, 1)
		start := time.Now()
		go func() {
			time.Sleep(time.Millisecond)
			_, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"other"}, Worker: "w", Lease: time.Minute})
			if err != nil {
				t.Error(err)
			}
			claimed <- time.Now()
		}()
		if _, err := s.Cancel(ctx, x[0].ID); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		t.Logf("grandchildren %v: the cancellation took %v; a claim of another queue started with it returned after %v",
			grandchildren, took, (<-claimed).Sub(start))
		var cancelled int
		if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_history WHERE state = 'cancelled'`).Scan(&cancelled); err != nil || cancelled != 2*n+1 {
			t.Fatalf("%d cancelled, %v; want %d", cancelled, err, 2*n+1)
		}
		return took
	}
	best := func(grandchildren bool) time.Duration {
		return min(cancelTime(grandchildren), cancelTime(grandchildren))
	}
	flat, deep := best(false), best(true)
	t.Logf("cancelling %d jobs: %v as direct children, %v as %d children with a child each (%.1fx)",
		2*n, flat, deep, n, float64(deep)/float64(flat))
	if deep > 8*flat+50*time.Millisecond {
		t.Errorf("a cascade of %d children with a child each took %v, %.1f times the %v of %d direct children",
			n, deep, float64(deep)/float64(flat), flat, 2*n)
	}
}

// TestFlowAdversaryCheckersSeeBreaks: the checks the other tests end with
// fail on the breaks they look for, made by hand in the tables: a counter
// off its edges, an edge resolved under a blocked child, a child released
// with an edge still open and then claimed, and a count drifted.
func TestFlowAdversaryCheckersSeeBreaks(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, sql string
		early     bool
	}{
		{"counter off its edges", `UPDATE readpast_jobs SET waiting_on = 2 WHERE kind = 'c'`, false},
		{"edge resolved under a blocked child", `UPDATE readpast_edges SET state = 'done'`, false},
		{"parent gone without resolving", `UPDATE readpast_jobs SET has_children = 0 WHERE kind = 'p'`, false},
		{"child released early", `UPDATE readpast_jobs SET state = 'pending', waiting_on = 0 WHERE kind = 'c'`, true},
		{"count drifted", `UPDATE readpast_counts SET n = n + 1 WHERE state = 'blocked'`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openTemp(t)
			ids := advFlow(t, s, fj("p", "q"), fj("c", "q", on("p", "")))
			if bad := append(advInvariants(t, s), advStatsMatch(t, s)...); len(bad) > 0 {
				t.Fatalf("a sound flow is reported broken: %v", bad)
			}
			if _, err := s.DB().ExecContext(ctx, c.sql); err != nil {
				t.Fatal(err)
			}
			if c.early {
				got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "w", Limit: 2, Lease: time.Minute})
				if err != nil || len(got) != 2 {
					t.Fatalf("claimed %v, %v", jobIDsOf(got), err)
				}
				if bad := advEarlyStarts(t, s); len(bad) != 1 || !strings.Contains(bad[0], fmt.Sprintf("job %d started", ids["c"])) {
					t.Fatalf("early starts: %v, want c's", bad)
				}
			}
			if bad := append(advInvariants(t, s), advStatsMatch(t, s)...); len(bad) == 0 {
				t.Fatal("the break is not seen")
			} else {
				t.Logf("seen: %v", bad)
			}
		})
	}
}
