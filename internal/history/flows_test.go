package history

import (
	"testing"

	"github.com/readpast/readpast"
)

func checkEdges(t *testing.T, b *h, final map[int64]Final, edges ...Edge) Report {
	t.Helper()
	r := Check(Input{Events: b.evs, Final: final, Edges: edges, DBNow: Time(at(100000))})
	for _, p := range r.Problems {
		t.Log(p)
	}
	return r
}

func TestFlowInOrder(t *testing.T) {
	b := (&h{}).enqueue(1, "").enqueue(2, "").
		claim("w", 1, "t1", "", 10, 11, 1000).write(OpComplete, "w", 1, "t1", 20, 21, OutOK).
		claim("w", 2, "t2", "", 22, 23, 1000).write(OpComplete, "w", 2, "t2", 30, 31, OutOK)
	r := checkEdges(t, b, map[int64]Final{1: succeeded("t1"), 2: succeeded("t2")}, Edge{1, 2, readpast.CancelChild})
	if !r.OK() || r.EarlyStarts != 0 || r.Stranded != 0 {
		t.Fatalf("a flow run in order: %s", r.Summary())
	}
}

func TestFlowEarlyStart(t *testing.T) {
	// The child's claim returned before its parent's completion began.
	b := (&h{}).enqueue(1, "").enqueue(2, "").
		claim("w", 1, "t1", "", 10, 11, 1000).
		claim("v", 2, "t2", "", 12, 13, 1000).
		write(OpComplete, "w", 1, "t1", 20, 21, OutOK).write(OpComplete, "v", 2, "t2", 30, 31, OutOK)
	r := checkEdges(t, b, map[int64]Final{1: succeeded("t1"), 2: succeeded("t2")}, Edge{1, 2, readpast.HoldChild})
	if r.OK() || r.EarlyStarts != 1 {
		t.Fatalf("a child claimed before its parent completed: %s", r.Summary())
	}
	// A refused completion of the parent does not count.
	b = (&h{}).enqueue(1, "").enqueue(2, "").
		claim("w", 1, "t1", "", 10, 11, 1000).write(OpComplete, "w", 1, "t1", 12, 13, OutStale).
		claim("v", 2, "t2", "", 14, 15, 1000)
	r = checkEdges(t, b, map[int64]Final{1: {State: readpast.StateRunning}, 2: {State: readpast.StateRunning}}, Edge{1, 2, readpast.CancelChild})
	if r.EarlyStarts != 1 {
		t.Fatalf("a child claimed after a stale completion of its parent: %s", r.Summary())
	}
	// run_anyway: a child claimed while its parent is still live.
	b = (&h{}).enqueue(1, "").enqueue(2, "").claim("v", 2, "t2", "", 14, 15, 1000)
	r = checkEdges(t, b, map[int64]Final{1: {State: readpast.StatePending}, 2: {State: readpast.StateRunning}}, Edge{1, 2, readpast.RunAnyway})
	if r.EarlyStarts != 1 {
		t.Fatalf("run_anyway child claimed before its parent ended: %s", r.Summary())
	}
}

func TestFlowStranded(t *testing.T) {
	b := (&h{}).enqueue(1, "").enqueue(2, "").enqueue(3, "").
		claim("w", 1, "t1", "", 10, 11, 1000).write(OpComplete, "w", 1, "t1", 20, 21, OutOK)
	blocked := Final{State: readpast.StateBlocked}
	// Every parent succeeded, and the child is still blocked.
	r := checkEdges(t, b, map[int64]Final{1: succeeded("t1"), 2: blocked}, Edge{1, 2, readpast.CancelChild})
	if r.Stranded != 1 {
		t.Fatalf("child blocked behind a parent that succeeded: %s", r.Summary())
	}
	// A parent that failed under cancel_child should have cancelled it.
	r = checkEdges(t, b, map[int64]Final{1: {State: readpast.StateFailed}, 2: blocked}, Edge{1, 2, readpast.CancelChild})
	if r.Stranded != 1 {
		t.Fatalf("child blocked behind a failed cancel_child parent: %s", r.Summary())
	}
	// Held, or behind a live parent: not stranded.
	r = checkEdges(t, b, map[int64]Final{1: {State: readpast.StateFailed}, 2: blocked}, Edge{1, 2, readpast.HoldChild})
	if r.Stranded != 0 {
		t.Fatalf("held child counted stranded: %s", r.Summary())
	}
	r = checkEdges(t, b, map[int64]Final{1: succeeded("t1"), 3: {State: readpast.StatePending}, 2: blocked},
		Edge{1, 2, readpast.CancelChild}, Edge{3, 2, readpast.CancelChild})
	if r.Stranded != 0 {
		t.Fatalf("child behind a live parent counted stranded: %s", r.Summary())
	}
}

// TestOperatorCancelEndsTheClaim: a job cancelled by an operator while
// claimed, then retried and claimed again within the first claim's
// lease, is no overlap; without the cancel it is one.
func TestOperatorCancelEndsTheClaim(t *testing.T) {
	b := (&h{}).enqueue(1, "").
		claim("w", 1, "t1", "", 10, 11, 1000).
		add(Event{Op: OpCancel, Proc: "op", ID: 1, Inv: at(20), Ret: at(21), Out: OutOK}).
		claim("v", 1, "t2", "", 30, 31, 1000).write(OpComplete, "v", 1, "t2", 40, 41, OutOK)
	if r := check(t, b, map[int64]Final{1: succeeded("t2")}, nil); r.Overlapping != 0 {
		t.Fatalf("a claim after an operator's cancel and retry: %s", r.Summary())
	}
	b = (&h{}).enqueue(1, "").
		claim("w", 1, "t1", "", 10, 11, 1000).
		claim("v", 1, "t2", "", 30, 31, 1000).write(OpComplete, "v", 1, "t2", 40, 41, OutOK)
	if r := check(t, b, map[int64]Final{1: succeeded("t2")}, nil); r.Overlapping == 0 {
		t.Fatalf("a claim within a valid lease, no cancel between: %s", r.Summary())
	}
}
