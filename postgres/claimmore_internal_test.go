package postgres

import (
	"testing"
	"time"
)

// TestClaimMoreBacksOff: the looks after short claims that pass over the
// same job first come at doubling waits up to claimMoreMax (a mark a
// held-open transaction keeps due costs a claim a second at most), one
// set at a time however many claims pass it over meanwhile, and start
// again from claimMoreMin once a claim passes over another job first.
func TestClaimMoreBacksOff(t *testing.T) {
	var c claimMore
	now := time.Now()
	look := func(passed int64) time.Duration {
		t.Helper()
		at, ok := c.next(now, passed)
		if !ok {
			t.Fatalf("at %v no look set for job %d, with none pending", now, passed)
		}
		d := at.Sub(now)
		now = at // the look comes, and its claim passes the job over again
		return d
	}
	for i, want := range []time.Duration{claimMoreMin, 2 * claimMoreMin, 4 * claimMoreMin} {
		if got := look(7); got != want {
			t.Fatalf("wait %d: %v, want %v", i, got, want)
		}
	}
	var last time.Duration
	for range 20 {
		last = look(7)
	}
	if last != claimMoreMax {
		t.Fatalf("after many claims passing over job 7 the wait is %v, want %v", last, claimMoreMax)
	}
	// Claims that other jobs' wake-ups make before the look comes, passing
	// job 7 over too, set no look of their own.
	if _, ok := c.next(now, 7); !ok {
		t.Fatal("no look set after the last one came")
	}
	for i := range 10 {
		if at, ok := c.next(now.Add(time.Duration(i)*time.Millisecond), 7); ok {
			t.Fatalf("a claim %d ms after the look was set set another, at %v", i, at)
		}
	}
	// A claim passing over another job first looks again soon.
	at, ok := c.next(now.Add(20*time.Millisecond), 8)
	if !ok || at.Sub(now.Add(20*time.Millisecond)) != claimMoreMin {
		t.Fatalf("after a claim passing over job 8 first: look at %v (set %v), want %v later", at, ok, claimMoreMin)
	}
}
