package postgres

import (
	"context"
	"sync"
	"time"
)

// notifyEvery is how often at most Store.Enqueue sends the wake-up
// (NOTIFY readpast) that other processes' workers listen for. Completions
// and failures that free a key's slot or make a job pending leave theirs
// to the trailing NOTIFY too (Store.Complete, Store.Fail), as claims leave
// the next starts of keys out of tokens to the dueAnnouncer: none of them
// notifies inside its statement.
//
// A transaction that notifies takes PostgreSQL's database-wide notify
// lock at commit, so producers that each enqueue one job at a time, each
// notifying, queue behind one another there: one job per enqueue ran at
// 2.6k jobs/s notifying on every enqueue and 3.2k without any NOTIFY
// (docs/benchmarks.md). Coalesced, the first enqueue of a burst notifies
// in its own statement, and the ones after it within notifyEvery are
// covered by one NOTIFY sent after they committed, at the end of the
// window: another process's workers learn of a job at most notifyEvery
// later than they would have (this process's own workers are woken at
// once, and every worker polls as well).
const notifyEvery = 5 * time.Millisecond

// notifier decides which enqueues notify, and sends the trailing NOTIFY
// that covers the others.
type notifier struct {
	every time.Duration
	send  func() // hands one NOTIFY readpast to be sent, without blocking

	mu      sync.Mutex
	last    time.Time   // when the last NOTIFY was sent, or decided on
	pending bool        // a trailing NOTIFY is scheduled and not yet begun
	timer   *time.Timer // the trailing NOTIFY's, while pending
}

// due reports whether an enqueue about to run should notify in its own
// statement. When it returns false, the caller calls trail once the
// enqueue has committed.
func (n *notifier) due() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	if n.pending || now.Sub(n.last) < n.every {
		return false
	}
	n.last = now
	return true
}

// trail makes sure that a NOTIFY is sent after now, for an enqueue that
// committed without one: at the end of the current window, by a NOTIFY
// already scheduled and not yet begun (it then begins after this call),
// or by one scheduled here.
func (n *notifier) trail() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending {
		return
	}
	n.pending = true
	n.timer = time.AfterFunc(max(n.every-time.Since(n.last), 0), n.fire)
}

// fire sends the trailing NOTIFY, unless flush sent it. send is called
// holding n.mu (it only hands the NOTIFY to the store's outbox), so that
// a flush that finds nothing pending comes after it.
func (n *notifier) fire() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.pending {
		return
	}
	n.pending = false
	n.last = time.Now()
	n.send()
}

// flush sends the trailing NOTIFY now if one is scheduled (Store.Close:
// the wake-ups of a store's last writes are not left to a timer that
// fires after the store closed).
func (n *notifier) flush() {
	n.mu.Lock()
	if n.timer != nil {
		n.timer.Stop()
	}
	n.mu.Unlock()
	n.fire()
}

// wakeOthers wakes other processes' claimers for a write that committed
// without notifying (a completion or failure that freed a slot or made a
// job pending): by the next trailing NOTIFY, or at once once Close began,
// which waits for the calls in flight but not for their timers.
func (s *Store) wakeOthers() {
	s.notify.trail()
	if s.out.closingNow() {
		s.notify.flush()
	}
}

// notifySQL wakes the workers of every process listening on readpast.
const notifySQL = "SELECT pg_notify('readpast', '')"

// sendNotify sends one NOTIFY readpast. A lost one only delays other
// processes' workers to their next poll, so errors are dropped.
func (s *Store) sendNotify() {
	ctx, cancel := context.WithTimeout(s.closeCtx, 5*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, notifySQL)
}
