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
