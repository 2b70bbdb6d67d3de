package history

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// claimKeys adds a claim of a job that names keys, the first as its
// group, as Wrap records it.
func (b *h) claimKeys(proc string, id int64, tok string, keys []string, inv, ret, leaseMS int) *h {
	b.add(Event{Op: OpClaimCall, Proc: proc, Inv: at(inv), Ret: at(ret), Out: OutOK, N: 1})
	return b.add(Event{Op: OpClaim, Proc: proc, ID: id, Token: tok, Group: keys[0], More: keys[1:], Inv: at(inv), Ret: at(ret), Lease: int64(leaseMS) * ms})
}

// TestLaterKeyOverLimit: a job's later keys are held to their limits as
// its first is. Three jobs of three different first keys share the
// later key "p" and run at once: over a limit of 2 on "p".
func TestLaterKeyOverLimit(t *testing.T) {
	b := (&h{}).enqueue(1, "a").enqueue(2, "b").enqueue(3, "c")
	b.claimKeys("A", 1, "a", []string{"a", "p"}, 10, 11, 1000).write(OpComplete, "A", 1, "a", 100, 101, OutOK)
	b.claimKeys("B", 2, "b", []string{"b", "p"}, 20, 21, 1000).write(OpComplete, "B", 2, "b", 110, 111, OutOK)
	b.claimKeys("C", 3, "c", []string{"c", "q", "p"}, 30, 31, 1000).write(OpComplete, "C", 3, "c", 120, 121, OutOK)
	final := map[int64]Final{1: succeeded("a"), 2: succeeded("b"), 3: succeeded("c")}
	limits := map[string]int{"a": 1, "b": 1, "c": 1, "q": 1, "p": 2}
	if r := check(t, b, final, limits); r.GroupOver != 1 {
		t.Fatalf("later key p of limit 2 held by 3 jobs at once: %s", r.Summary())
	}
	limits["p"] = 3
	if r := check(t, b, final, limits); !r.OK() {
		t.Fatalf("limit 3 on p: %s", r.Summary())
	}
}

// TestLaterKeyRateOver: starts count against the rate of every key the
// job names, not only its first.
func TestLaterKeyRateOver(t *testing.T) {
	b := &h{}
	final := map[int64]Final{}
	for i, inv := range []int{0, 300, 600, 900} {
		id := int64(i + 1)
		tok := string(rune('a' + i))
		first := string(rune('k' + i)) // a first key of its own each
		b.enqueue(id, first).claimKeys("A", id, tok, []string{first, "r"}, inv, inv+5, 1000).write(OpComplete, "A", id, tok, inv+10, inv+11, OutOK)
		final[id] = succeeded(tok)
	}
	r := Check(Input{Events: b.evs, Final: final, Limits: map[string]int{"k": 9, "l": 9, "m": 9, "n": 9, "r": 9},
		Rates: map[string]Rate{"r": {Interval: time.Second, Burst: 1}}, DBNow: Time(at(100000))})
	for _, p := range r.Problems {
		t.Log(p)
	}
	if r.RateOver != 1 {
		t.Fatalf("four starts of later key r within a second at 1/s burst 1: %s", r.Summary())
	}
}

// TestWrapRecordsLaterKeys: Wrap records a claimed job's keys after its
// first, which the checks above count.
func TestWrapRecordsLaterKeys(t *testing.T) {
	ctx := context.Background()
	_, s, l, dir := wrapSQLite(t)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Keys: []string{"a", "b", "c"}}, {Kind: "k", Group: "d"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 2, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	evs, _, err := Read(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, e := range evs {
		if e.Op == OpClaim {
			got[e.Group] = e.More
		}
	}
	if len(got) != 2 || !slices.Equal(got["a"], []string{"b", "c"}) || got["d"] != nil {
		t.Fatalf("claims recorded with later keys %v, want a: [b c] and d: none", got)
	}
}

// TestRepeatedKeyHoldsOneSlot: a record naming a key twice (no store
// accepts one) holds one slot of it, not two.
func TestRepeatedKeyHoldsOneSlot(t *testing.T) {
	b := (&h{}).enqueue(1, "a")
	b.claimKeys("A", 1, "a", []string{"a", "a"}, 10, 11, 1000).write(OpComplete, "A", 1, "a", 100, 101, OutOK)
	if r := check(t, b, map[int64]Final{1: succeeded("a")}, map[string]int{"a": 1}); !r.OK() {
		t.Fatalf("one job naming a twice, limit 1: %s", r.Summary())
	}
}

// TestPeakCountsEveryKey: Peak is the most claims holding a key at once,
// on first and later keys alike, and claims one after another hold one.
func TestPeakCountsEveryKey(t *testing.T) {
	b := (&h{}).enqueue(1, "a").enqueue(2, "b").enqueue(3, "c").enqueue(4, "a")
	b.claimKeys("A", 1, "a", []string{"a", "p"}, 10, 11, 1000).write(OpComplete, "A", 1, "a", 100, 101, OutOK)
	b.claimKeys("B", 2, "b", []string{"b", "p"}, 20, 21, 1000).write(OpComplete, "B", 2, "b", 110, 111, OutOK)
	b.claimKeys("C", 3, "c", []string{"c", "q", "p"}, 30, 31, 1000).write(OpComplete, "C", 3, "c", 120, 121, OutOK)
	// Job 4 takes a's slot after job 1 gave it back.
	b.claimKeys("A", 4, "d", []string{"a", "q"}, 200, 201, 1000).write(OpComplete, "A", 4, "d", 300, 301, OutOK)
	final := map[int64]Final{1: succeeded("a"), 2: succeeded("b"), 3: succeeded("c"), 4: succeeded("d")}
	r := check(t, b, final, map[string]int{"a": 1, "b": 1, "c": 1, "q": 1, "p": 3})
	if !r.OK() {
		t.Fatalf("limits hold: %s", r.Summary())
	}
	want := map[string]int{"a": 1, "b": 1, "c": 1, "p": 3, "q": 1}
	if !maps.Equal(r.Peak, want) {
		t.Fatalf("Peak = %v, want %v", r.Peak, want)
	}
}
