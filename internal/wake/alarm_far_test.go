package wake

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAlarmFarFutureDoesNotSpin: a job may be enqueued for a
// run_at far ahead (validate.go accepts any year up to 9999, and "never,
// unless retried by hand" is a common use of a far run_at); every store
// that writes or hears of it (postgres/due.go: the enqueuer's own alarm
// and each listener's, from the "due:" NOTIFY) calls Alarm.At with it.
// time.Until of a time more than 292 years ahead saturates at the largest
// Duration, and arm adds alarmLate to it: the sum wraps to a negative
// duration, the timer fires at once, fire finds nothing due and arms
// again, at once, for ever. The process then burns a core for as long as
// the alarm's earliest time is that far one. The same happens after an
// earlier time is set and fires (a far time replaced by an earlier one).
//
// The test measures the process's CPU time while only far times are
// pending; an idle alarm uses next to none.
func TestAlarmFarFutureDoesNotSpin(t *testing.T) {
	for _, c := range []struct {
		name    string
		earlier bool
	}{{"alone", false}, {"after an earlier time fired", true}} {
		t.Run(c.name, func(t *testing.T) {
			calls := make(chan struct{}, 16)
			a := NewAlarm(func() { calls <- struct{}{} })
			defer a.Stop()
			far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
			a.At(far)
			if c.earlier {
				a.At(time.Now().Add(20 * time.Millisecond)) // replaces the far one as the earliest
				select {
				case <-calls:
				case <-time.After(2 * time.Second):
					t.Fatal("the earlier time never called")
				}
			}
			time.Sleep(20 * time.Millisecond)
			before := cpuTime(t)
			const idle = 300 * time.Millisecond
			time.Sleep(idle)
			used := cpuTime(t) - before
			t.Logf("CPU used over %v with an alarm at %v pending: %v", idle, far.Format("2006-01-02"), used)
			if used > idle/3 {
				t.Errorf("an alarm whose only pending time is %v ahead used %v of CPU in %v of wall time: its timer spins (arm: time.Until saturates, + alarmLate wraps negative)",
					time.Until(far).Round(time.Hour), used, idle)
			}
			select {
			case <-calls:
				t.Error("the far-future alarm called its function")
			default:
			}
			if a.Pending() != 1 {
				t.Errorf("pending %d, want 1 (the far time)", a.Pending())
			}
		})
	}
}
