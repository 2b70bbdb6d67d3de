package wake

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestAlarm: an alarm calls its function once at (a little after) each
// time it is given, in time order whatever the order given, times close
// together share one call, a past time calls at once, and Stop cancels the
// calls to come.
func TestAlarm(t *testing.T) {
	calls := make(chan time.Time, 10)
	a := NewAlarm(func() { calls <- time.Now() })
	defer a.Stop()
	start := time.Now()
	a.At(start.Add(120 * time.Millisecond))
	a.At(start.Add(60 * time.Millisecond))
	a.At(start.Add(61 * time.Millisecond)) // shares the call at 60 ms
	for i, want := range []time.Duration{60 * time.Millisecond, 120 * time.Millisecond} {
		select {
		case at := <-calls:
			// Never early; late by up to a second on a loaded machine
			// (a lost time shows as a call that never comes).
			if d := at.Sub(start); d < want || d > want+time.Second {
				t.Fatalf("call %d came at %v, want %v", i, d, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("call %d never came", i)
		}
	}
	select {
	case <-calls:
		t.Fatal("a third call: the times 1 ms apart did not share one")
	case <-time.After(50 * time.Millisecond):
	}
	a.At(time.Now().Add(-time.Second))
	select {
	case <-calls:
	case <-time.After(time.Second):
		t.Fatal("a past time did not call at once")
	}
	var late atomic.Bool
	b := NewAlarm(func() { late.Store(true) })
	b.At(time.Now().Add(30 * time.Millisecond))
	b.Stop()
	time.Sleep(60 * time.Millisecond)
	if late.Load() || b.Pending() != 0 {
		t.Fatal("a stopped alarm called")
	}
}

// TestAlarmNeverCallsBeforeATime: times a few milliseconds apart, given in
// either order, share a call only when it comes at or after each of them
// (a call before a time would wake claimers before its job is due, and
// none would come for it after).
func TestAlarmNeverCallsBeforeATime(t *testing.T) {
	for _, gap := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond, 6 * time.Millisecond} {
		for _, laterFirst := range []bool{false, true} {
			calls := make(chan time.Time, 10)
			a := NewAlarm(func() { calls <- time.Now() })
			t1 := time.Now().Add(50 * time.Millisecond)
			t2 := t1.Add(gap)
			if laterFirst {
				a.At(t2)
				a.At(t1)
			} else {
				a.At(t1)
				a.At(t2)
			}
			var last time.Time
			deadline := time.After(2 * time.Second)
		wait:
			for {
				select {
				case c := <-calls:
					if c.Before(t1) {
						t.Errorf("gap %v, later first %v: a call %v before the first time", gap, laterFirst, t1.Sub(c))
					}
					last = c
					if !last.Before(t2) {
						break wait
					}
				case <-deadline:
					break wait
				}
			}
			a.Stop()
			if last.Before(t2) {
				t.Errorf("times %v apart (later first: %v): no call at or after the second; the last came %v before it",
					gap, laterFirst, t2.Sub(last))
			}
		}
	}
}
