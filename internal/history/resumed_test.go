package history

import (
	"testing"
	"time"
)

// TestResumedCountsCallsThatSpanTheFault: a claim call waiting when the
// damage ended that takes jobs after it is the process working again, not
// the process's next call; calls that ended before the fault, failed, or
// waited and came back empty say nothing.
func TestResumedCountsCallsThatSpanTheFault(t *testing.T) {
	b := &h{}
	call := func(proc string, inv, ret, n int, out string) {
		b.add(Event{Op: OpClaimCall, Proc: proc, Inv: at(inv), Ret: at(ret), Out: out, N: n})
	}
	// The fault ends at 1,000 ms.
	call("spans", 500, 900, 2, OutOK)     // before: says nothing
	call("spans", 950, 2900, 4, OutOK)    // waiting at the end, jobs at 2,900
	call("spans", 3000, 5200, 1, OutOK)   // a long poll that waited for work
	call("after", 800, 1100, 0, OutError) // failed
	call("after", 1200, 1500, 0, OutOK)   // empty, at once: working
	call("idle", 900, 4000, 0, OutOK)     // waited and came back empty
	call("idle", 4000, 6500, 0, OutOK)    // again
	got := Resumed(b.evs, Time(at(1000)))
	want := map[string]time.Duration{"spans": 1900 * time.Millisecond, "after": 500 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("Resumed = %v, want %v", got, want)
	}
	for p, d := range want {
		if got[p] != d {
			t.Errorf("%s resumed after %v, want %v (all: %v)", p, got[p], d, got)
		}
	}
}
