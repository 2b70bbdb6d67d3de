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
