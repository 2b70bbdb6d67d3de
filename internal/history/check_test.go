package history

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// h builds synthetic histories: times in milliseconds from a base.
type h struct {
	evs []Event
}

const ms = int64(time.Millisecond)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func at(m int) int64 { return base + int64(m)*ms }

func (b *h) add(e Event) *h { b.evs = append(b.evs, e); return b }

func (b *h) enqueue(id int64, group string) *h {
	return b.add(Event{Op: OpEnqueue, Proc: "p", ID: id, Group: group, Inv: at(0), Ret: at(1), Out: OutOK})
}

func (b *h) claim(proc string, id int64, tok, group string, inv, ret, leaseMS int) *h {
	b.add(Event{Op: OpClaimCall, Proc: proc, Inv: at(inv), Ret: at(ret), Out: OutOK, N: 1})
	return b.add(Event{Op: OpClaim, Proc: proc, ID: id, Token: tok, Group: group, Inv: at(inv), Ret: at(ret), Lease: int64(leaseMS) * ms})
}

func (b *h) run(proc string, id int64, tok string, start, end int) *h {
	b.add(Event{Op: OpStart, Proc: proc, ID: id, Token: tok, Inv: at(start)})
	if end >= 0 {
		b.add(Event{Op: OpEnd, Proc: proc, ID: id, Token: tok, Inv: at(end)})
	}
	return b
}

func (b *h) write(op, proc string, id int64, tok string, inv, ret int, out string) *h {
	return b.add(Event{Op: op, Proc: proc, ID: id, Token: tok, Inv: at(inv), Ret: at(ret), Out: out})
}

func succeeded(tok string) Final { return Final{State: readpast.StateSucceeded, Token: tok} }

func check(t *testing.T, b *h, final map[int64]Final, limits map[string]int) Report {
	t.Helper()
	r := Check(Input{Events: b.evs, Final: final, Limits: limits, DBNow: Time(at(100000))})
	for _, p := range r.Problems {
		t.Log(p)
	}
	return r
}

func TestCleanHistory(t *testing.T) {
	b := (&h{}).enqueue(1, "g").enqueue(2, "g").enqueue(3, "")
	// Job 1: claimed by A, run, completed. Job 2: A's lease runs out
	// while it runs (no extension), B claims it after, A's late
	// completion is refused, B completes. Job 3 fails once and is retried.
	b.claim("A", 1, "t1", "g", 10, 12, 1000).run("A", 1, "t1", 13, 50).write(OpComplete, "A", 1, "t1", 51, 53, OutOK)
	b.claim("A", 2, "t2", "g", 60, 61, 100).run("A", 2, "t2", 62, 400)
	b.claim("B", 2, "t2b", "g", 300, 302, 1000).run("B", 2, "t2b", 303, 310).write(OpComplete, "B", 2, "t2b", 311, 312, OutOK)
	b.write(OpComplete, "A", 2, "t2", 401, 402, OutStale)
	b.claim("A", 3, "t3", "", 10, 12, 1000).run("A", 3, "t3", 13, 14).write(OpFail, "A", 3, "t3", 15, 16, OutOK)
	b.claim("B", 3, "t3b", "", 20, 21, 1000).run("B", 3, "t3b", 22, 23).write(OpComplete, "B", 3, "t3b", 24, 25, OutOK)
	// A repeated completion with the winning token is fine.
	b.write(OpComplete, "B", 3, "t3b", 30, 31, OutOK)
	r := check(t, b, map[int64]Final{1: succeeded("t1"), 2: succeeded("t2b"), 3: succeeded("t3b")}, nil)
	if !r.OK() || r.Completed != 3 || r.Enqueued != 3 || r.Reran != 2 || r.StaleRefused != 1 {
		t.Fatalf("clean history judged: %s", r.Summary())
	}
}

func TestLost(t *testing.T) {
	b := (&h{}).enqueue(1, "").enqueue(2, "")
	b.add(Event{Op: OpEnqueue, Proc: "p", Inv: at(2), Ret: at(3), Out: OutError, N: 1}) // unacknowledged: not counted
	r := check(t, b, map[int64]Final{1: {Missing: true}, 2: {State: readpast.StatePending}}, nil)
	if r.Lost != 1 || r.Pending != 1 || r.Enqueued != 2 || r.OK() {
		t.Fatalf("want 1 lost: %s", r.Summary())
	}
}

func TestFinishedTwice(t *testing.T) {
	b := (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 100).write(OpComplete, "A", 1, "a", 20, 21, OutOK)
	b.claim("B", 1, "b", "", 500, 501, 100).write(OpComplete, "B", 1, "b", 520, 521, OutOK)
	r := check(t, b, map[int64]Final{1: succeeded("b")}, nil)
	if r.Duplicated != 1 || r.OK() {
		t.Fatalf("want 1 duplicated: %s", r.Summary())
	}
}

func TestClaimedUnderAValidLease(t *testing.T) {
	b := (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 1000)
	b.claim("B", 1, "b", "", 500, 501, 1000).write(OpComplete, "B", 1, "b", 520, 521, OutOK)
	r := check(t, b, map[int64]Final{1: succeeded("b")}, nil)
	if r.Overlapping != 1 {
		t.Fatalf("want 1 overlapping: %s", r.Summary())
	}
	// An extension keeps the lease valid past its first end.
	b = (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 100).write(OpExtend, "A", 1, "a", 80, 81, OutOK)
	b.evs[len(b.evs)-1].Lease = 100 * ms
	b.claim("B", 1, "b", "", 150, 151, 100).write(OpComplete, "B", 1, "b", 160, 161, OutOK)
	if r := check(t, b, map[int64]Final{1: succeeded("b")}, nil); r.Overlapping != 1 {
		t.Fatalf("extension ignored: %s", r.Summary())
	}
	// Without the extension the same claims are fine.
	b.evs = append(b.evs[:3], b.evs[4:]...)
	if r := check(t, b, map[int64]Final{1: succeeded("b")}, nil); !r.OK() {
		t.Fatalf("expired lease re-claimed judged: %s", r.Summary())
	}
}

func TestRunsOverlap(t *testing.T) {
	// Two claims that look fine, but the first run started after the
	// second one: the record of runs shows the overlap.
	b := (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 300).run("A", 1, "a", 12, -1) // killed
	b.claim("B", 1, "b", "", 320, 321, 300).run("B", 1, "b", 250, 330).write(OpComplete, "B", 1, "b", 331, 332, OutOK)
	r := check(t, b, map[int64]Final{1: succeeded("b")}, nil)
	if r.Overlapping != 1 {
		t.Fatalf("want the runs' overlap: %s", r.Summary())
	}
}

func TestGroupOverLimit(t *testing.T) {
	b := (&h{}).enqueue(1, "g").enqueue(2, "g").enqueue(3, "g")
	b.claim("A", 1, "a", "g", 10, 11, 1000).write(OpComplete, "A", 1, "a", 100, 101, OutOK)
	b.claim("B", 2, "b", "g", 20, 21, 1000).write(OpComplete, "B", 2, "b", 110, 111, OutOK)
	b.claim("C", 3, "c", "g", 30, 31, 1000).write(OpComplete, "C", 3, "c", 120, 121, OutOK)
	final := map[int64]Final{1: succeeded("a"), 2: succeeded("b"), 3: succeeded("c")}
	if r := check(t, b, final, map[string]int{"g": 2}); r.GroupOver != 1 {
		t.Fatalf("limit 2: %s", r.Summary())
	}
	if r := check(t, b, final, map[string]int{"g": 3}); !r.OK() {
		t.Fatalf("limit 3: %s", r.Summary())
	}
	if r := check(t, b, final, nil); r.GroupOver != 2 {
		t.Fatalf("limit 1: %s", r.Summary())
	}
}

// TestRateOver: starts certainly made within one window count against
// the key's rate; starts whose calls straddle the window's end do not.
func TestRateOver(t *testing.T) {
	b := &h{}
	final := map[int64]Final{}
	// 4 claims of key r within 900 ms, then one 2 s later.
	for i, inv := range []int{0, 300, 600, 900, 3000} {
		id := int64(i + 1)
		tok := string(rune('a' + i))
		b.enqueue(id, "r").claim("A", id, tok, "r", inv, inv+5, 1000).write(OpComplete, "A", id, tok, inv+10, inv+11, OutOK)
		final[id] = succeeded(tok)
	}
	check := func(rate Rate) Report {
		r := Check(Input{Events: b.evs, Final: final, Limits: map[string]int{"r": 10}, Rates: map[string]Rate{"r": rate}, DBNow: Time(at(100000))})
		for _, p := range r.Problems {
			t.Log(p)
		}
		return r
	}
	// 1 a second, burst 1: at most 1 + 1 + 1 = 3 in a second; 4 happened.
	if r := check(Rate{Interval: time.Second, Burst: 1}); r.RateOver != 1 || r.OK() {
		t.Fatalf("rate 1/s burst 1: %s", r.Summary())
	}
	if r := check(Rate{Interval: time.Second, Burst: 2}); !r.OK() {
		t.Fatalf("rate 1/s burst 2: %s", r.Summary())
	}
	// Over a 5 s window, 2/s burst 1 allows 12.
	if r := check(Rate{Interval: 500 * time.Millisecond, Burst: 1, Window: 5 * time.Second}); !r.OK() {
		t.Fatalf("5 s window: %s", r.Summary())
	}
}

// TestWriteSentByAKilledProcess: a completion sent just before its
// process was killed may have landed; the group slot may be free from
// the moment it was sent, not only when the lease ends.
func TestWriteSentByAKilledProcess(t *testing.T) {
	b := (&h{}).enqueue(1, "g").enqueue(2, "g")
	b.claim("A", 1, "a", "g", 10, 11, 1000).run("A", 1, "a", 12, 20).write(OpComplete, "A", 1, "a", 21, 0, OutSent) // killed here
	b.claim("B", 2, "b", "g", 30, 31, 1000).write(OpComplete, "B", 2, "b", 40, 41, OutOK)
	final := map[int64]Final{1: succeeded("a"), 2: succeeded("b")}
	if r := check(t, b, final, nil); !r.OK() {
		t.Fatalf("%s", r.Summary())
	}
	b.evs = slices.DeleteFunc(b.evs, func(e Event) bool { return e.Out == OutSent })
	if r := check(t, b, final, nil); r.GroupOver != 1 {
		t.Fatalf("without the sent record the overlap must show: %s", r.Summary())
	}
}

func TestStaleWriteAccepted(t *testing.T) {
	b := (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 100)
	b.claim("B", 1, "b", "", 200, 201, 1000)
	b.write(OpComplete, "A", 1, "a", 300, 301, OutOK) // should have been refused
	b.write(OpComplete, "B", 1, "b", 310, 311, OutOK)
	r := check(t, b, map[int64]Final{1: succeeded("b")}, nil)
	if r.StaleAccepted != 1 {
		t.Fatalf("want 1 stale accepted: %s", r.Summary())
	}
	// An extension accepted after its own claim finished the job.
	b = (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 1000).write(OpComplete, "A", 1, "a", 20, 21, OutOK).write(OpExtend, "A", 1, "a", 30, 31, OutOK)
	if r := check(t, b, map[int64]Final{1: succeeded("a")}, nil); r.StaleAccepted != 1 {
		t.Fatalf("extend after completion: %s", r.Summary())
	}
}

func TestStuck(t *testing.T) {
	b := (&h{}).enqueue(1, "")
	b.claim("A", 1, "a", "", 10, 11, 100)
	exp := Time(at(111))
	r := check(t, b, map[int64]Final{1: {State: readpast.StateRunning, Token: "a", LeaseExpiresAt: &exp}}, nil)
	if r.Stuck != 1 {
		t.Fatalf("want 1 stuck: %s", r.Summary())
	}
}

// TestWrapRecordsARealRun runs the real store through Wrap and checks
// the record: claims, completions and a stale write refused.
// wrapSQLite opens a SQLite store in a temporary directory and wraps it
// with a log there; the history reads back from dir/*.jsonl.
func wrapSQLite(t *testing.T) (s *sqlite.Store, w *Store, log *Log, dir string) {
	t.Helper()
	dir = t.TempDir()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "q.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	log, err = Create(filepath.Join(dir, "a.jsonl"), "a")
	if err != nil {
		t.Fatal(err)
	}
	return s, Wrap(s, log), log, dir
}

func TestWrapRecordsARealRun(t *testing.T) {
	ctx := context.Background()
	s, w, log, dir := wrapSQLite(t)
	jobs, err := w.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Group: "g"}, {Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Claim(ctx, readpast.ClaimParams{Worker: "a", Limit: 2, Lease: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim: %v %v", got, err)
	}
	if _, err := w.Extend(ctx, got[0].ID, got[0].Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Complete(ctx, []readpast.Completion{{ID: got[0].ID, Token: got[0].Token}, {ID: got[1].ID, Token: got[1].Token}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Release(ctx, got[0].ID, got[0].Token); err == nil {
		t.Fatal("release of a completed job accepted")
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	evs, bad, err := Read(filepath.Join(dir, "*.jsonl"))
	if err != nil || bad != 0 {
		t.Fatal(err, bad)
	}
	var ops []string
	for _, e := range evs {
		ops = append(ops, e.Op+":"+e.Out)
	}
	want := "enqueue:ok enqueue:ok claimcall:ok claim: claim: extend:ok complete:sent complete:sent complete:ok complete:ok release:sent release:"
	if got := strings.Join(ops, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "release:"+OutStale) && !strings.HasSuffix(got, "release:"+OutNotFound) {
		t.Fatalf("recorded %s", got)
	}
	final := map[int64]Final{}
	for _, j := range jobs {
		g, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		final[j.ID] = Final{State: g.State, Token: g.Token}
	}
	r := Check(Input{Events: evs, Final: final})
	if !r.OK() || r.Completed != 2 || r.StaleRefused != 1 {
		t.Fatalf("%s %v", r.Summary(), r.Problems)
	}
}

func TestRedone(t *testing.T) {
	b := (&h{}).enqueue(1, "").enqueue(2, "")
	// Job 1 succeeded under A, but the completion's answer was lost and it
	// was never applied: B claims the job again and does the work twice.
	b.claim("A", 1, "t1", "", 10, 11, 1000).run("A", 1, "t1", 12, 20).write(OpComplete, "A", 1, "t1", 21, 22, OutError)
	b.claim("B", 1, "t1b", "", 2000, 2001, 1000).run("B", 1, "t1b", 2002, 2003).write(OpComplete, "B", 1, "t1b", 2004, 2005, OutOK)
	// Job 2 failed under A; the failure's answer was lost (it was applied)
	// and B runs the retry: by design, not work done twice.
	b.claim("A", 2, "t2", "", 10, 11, 1000).run("A", 2, "t2", 12, 20).write(OpFail, "A", 2, "t2", 21, 22, OutError)
	b.claim("B", 2, "t2b", "", 30, 31, 1000).run("B", 2, "t2b", 32, 33).write(OpComplete, "B", 2, "t2b", 34, 35, OutOK)
	b.write(OpFail, "A", 2, "t2", 40, 41, OutStale)
	r := check(t, b, map[int64]Final{1: succeeded("t1b"), 2: succeeded("t2b")}, nil)
	if r.Redone != 1 {
		t.Fatalf("redone = %d, want 1 (job 1 only): %s", r.Redone, r.Summary())
	}
}
