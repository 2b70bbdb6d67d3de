package wake

import (
	"slices"
	"sync"
	"time"
)

// Alarm calls a function at times it is given: when a job that a store
// wrote becomes due later (an enqueue, a retry or a snooze with a run_at
// ahead), its claimers are woken then instead of at their next poll.
// Times close together share one call (At), and at
// most alarmMax times are kept (the earliest): a time left out only
// leaves its job to the poll. Every call comes at or after each time it
// stands for. Safe for concurrent use.
type Alarm struct {
	f func()

	mu      sync.Mutex
	times   []time.Time // sorted, the times to call f at
	timer   *time.Timer // set for times[0], when times is not empty
	stopped bool
}

const (
	alarmCoalesce = 5 * time.Millisecond
	alarmMax      = 1024
	// alarmLate is how long after a time f is called: a job's run_at
	// is compared with the database's clock, which may run a little
	// behind this host's.
	alarmLate = 2 * time.Millisecond
	// alarmHorizon is the longest the timer is set for at once.
	alarmHorizon = 24 * time.Hour
)

// NewAlarm returns an Alarm that calls f.
func NewAlarm(f func()) *Alarm { return &Alarm{f: f} }

// At makes the alarm call f at t (a past t: at once).
//
// A time shares the call of one already set when that call comes at or
// after it: the set time is at most alarmCoalesce later, or at most
// alarmLate earlier (its call comes alarmLate after it).
func (a *Alarm) At(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	i, _ := slices.BinarySearchFunc(a.times, t, time.Time.Compare)
	if i < len(a.times) && a.times[i].Sub(t) <= alarmCoalesce {
		return // the call at times[i], a little later, covers t
	}
	if i > 0 && t.Sub(a.times[i-1]) <= alarmLate {
		return // the call alarmLate after times[i-1] covers t
	}
	if i == alarmMax {
		return
	}
	a.times = slices.Insert(a.times, i, t)
	if len(a.times) > alarmMax {
		a.times = a.times[:alarmMax]
	}
	if i == 0 {
		a.arm()
	}
}

// arm sets the timer for times[0]. a.mu is held.
func (a *Alarm) arm() {
	// A time past the horizon (a run_at years ahead, where time.Until
	// saturates and adding alarmLate would wrap) wakes the timer at the
	// horizon, which finds nothing due and sets it again.
	d := min(time.Until(a.times[0]), alarmHorizon) + alarmLate
	if a.timer == nil {
		a.timer = time.AfterFunc(d, a.fire)
		return
	}
	a.timer.Reset(d)
}

// fire calls f for the times that have come, and sets the timer for the
// next.
func (a *Alarm) fire() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	now := time.Now()
	n := 0
	for n < len(a.times) && !a.times[n].After(now) {
		n++
	}
	a.times = a.times[n:]
	if len(a.times) > 0 {
		a.arm()
	}
	a.mu.Unlock()
	if n > 0 {
		a.f()
	}
}

// Stop cancels every call to come.
func (a *Alarm) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	a.times = nil
	if a.timer != nil {
		a.timer.Stop()
	}
}

// Pending returns how many calls are to come (for tests).
func (a *Alarm) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.times)
}
