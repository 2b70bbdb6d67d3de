package sqlite

import (
	"time"

	"github.com/readpast/readpast"
)

// A job this store writes with a run_at ahead (an enqueue for later, a
// failure retried later, a snooze) becomes due when nobody looks, so the
// store sets an alarm (Store.due) that wakes its claimers then instead of
// at their next poll. Other processes on the same file are not told:
// their workers find such jobs at their poll.

// dueLater sets alarms for the jobs that become due later.
func (s *Store) dueLater(jobs []*readpast.Job) {
	now := time.Now()
	for _, j := range jobs {
		s.dueAt(now, j.RunAt)
	}
}

// dueAt sets an alarm for t when it is later than now.
func (s *Store) dueAt(now, t time.Time) {
	if t.After(now) {
		s.due.At(t)
	}
}

// wakeup is what a write owes the claimers once it commits: a wake-up
// now when it made something claimable, and alarms at the later times at
// which the ready marks it wrote become due. A key out of tokens is
// marked at its next start (announceHeads), and nothing else wakes
// anybody then: the claim that spent its tokens may have been another
// process's, or TakeTokens, or a claim that left the key full.
type wakeup struct {
	now   bool
	later []time.Time
}

// or is w and o together.
func (w wakeup) or(o wakeup) wakeup {
	return wakeup{now: w.now || o.now, later: append(w.later, o.later...)}
}

// announce sets w's alarms and wakes the claimers if w says so.
func (s *Store) announce(w wakeup) {
	for _, t := range w.later {
		s.due.At(t) // a past t: at once
	}
	if w.now {
		s.wake()
	}
}
