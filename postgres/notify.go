package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// send hands one NOTIFY readpast to be sent, without blocking; own
	// says that every write it covers woke this store's claimers itself,
	// so that this store's listener may pass its echo over.
	send func(own bool)

	mu      sync.Mutex
	last    time.Time   // when the last NOTIFY was sent, or decided on
	pending bool        // a trailing NOTIFY is scheduled and not yet begun
	own     bool        // the pending NOTIFY covers only writes that woke this store's claimers
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

// trail makes sure that a NOTIFY is sent after now, for a write that
// committed without one: at the end of the current window, by a NOTIFY
// already scheduled and not yet begun (it then begins after this call),
// or by one scheduled here. own says that the write woke this store's
// claimers itself (an enqueue); a NOTIFY covering any write that did not
// wakes this store's claimers too.
func (n *notifier) trail(own bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending {
		n.own = n.own && own
		return
	}
	n.pending = true
	n.own = own
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
	n.send(n.own)
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
	s.notify.trail(false)
	if s.out.closingNow() {
		s.notify.flush()
	}
}

// sendNotify sends one NOTIFY readpast, with the store's own payload when
// own (see echoes). A lost one only delays other processes'
// workers to their next poll, so errors are dropped.
func (s *Store) sendNotify(own bool) {
	ctx, cancel := context.WithTimeout(s.closeCtx, 5*time.Second)
	defer cancel()
	payload := ""
	if own {
		payload = s.echoes.prefix
	}
	_, _ = s.pool.Exec(ctx, notifyPayloadSQL, payload)
}

// echoPrefix begins the payload of a NOTIFY readpast sent for writes that
// woke the sending store's claimers themselves (echoes).
const echoPrefix = "from:"

// maxFailedEchoes bounds the failed enqueues whose echo a store keeps
// waking for; past it the oldest are forgotten (their claimers then find
// the jobs at their poll).
const maxFailedEchoes = 1024

// echoes is what lets a store's listener pass over the echo of its own
// enqueues. A store wakes its own claimers once its Enqueue has committed,
// so the NOTIFY of that enqueue (in its statement, or the trailing one when
// every write it covers was such an enqueue) carries the store's payload:
// prefix (echoPrefix and an id drawn when the store is made), and for one
// sent in an enqueue's statement, a sequence number. Every other listener
// wakes for it; this store's passes it over, else each of its enqueues
// would wake its claimers twice, and the second claim finds the jobs taken.
// An Enqueue that returned an error woke its claimers then, but its
// statement may still commit later (a cancel that never reached the
// server): the echo of that statement's number wakes them.
type echoes struct {
	prefix string
	seq    atomic.Uint64

	mu     sync.Mutex
	failed []string // payloads of enqueues that returned an error, oldest first
}

// next is the payload of an enqueue statement's own NOTIFY.
func (e *echoes) next() string {
	return e.prefix + ":" + strconv.FormatUint(e.seq.Add(1), 10)
}

// fail records that the enqueue whose NOTIFY said payload returned an
// error.
func (e *echoes) fail(payload string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.failed) == maxFailedEchoes {
		e.failed = e.failed[1:]
	}
	e.failed = append(e.failed, payload)
}

// passOver reports whether the listener passes over a NOTIFY that said
// payload: the echo of this store's own enqueue, unless that enqueue
// returned an error.
func (e *echoes) passOver(payload string) bool {
	rest, ok := strings.CutPrefix(payload, e.prefix)
	if !ok || (rest != "" && rest[0] != ':') {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if i := slices.Index(e.failed, payload); i >= 0 {
		e.failed = slices.Delete(e.failed, i, i+1)
		return false
	}
	return true
}

// everyone is the payload of a NOTIFY that every listener wakes for, this
// store's too.
func everyone() *string { return new(string) }

// ownWake is the payload of the NOTIFY that an enqueue of this store's,
// which wakes its claimers once it commits, sends in its own statement
// when due (notifier.due), or nil.
func (s *Store) ownWake(due bool) *string {
	if !due {
		return nil
	}
	p := s.echoes.next()
	return &p
}

// enqueueFailed wakes this store's claimers after an Enqueue that returned
// err: at once, and, when its outcome is unknown (it may have committed,
// or may commit later), when the NOTIFY its statement sent (payload, nil
// for none) comes back; a trailing NOTIFY covers the other processes when
// it sent none. A statement that failed with an error of the server's
// rolled back, and one that was never sent did nothing: neither is kept
// among the failed, which hold the last maxFailedEchoes.
func (s *Store) enqueueFailed(payload *string, err error) {
	s.hub.Broadcast()
	if !outcomeUnknown(err) {
		return
	}
	if payload != nil {
		s.echoes.fail(*payload)
	} else {
		s.notify.trail(false)
	}
}
