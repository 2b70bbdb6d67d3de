package postgres

import (
	"sync"
	"time"

	"github.com/readpast/readpast"
)

// A claim reads the claim index (queue, priority, run_at, id) from the
// head of the claim order, and the head is where every job already claimed
// leaves its index entry until a vacuum removes it. A vacuum can remove
// none of them while any snapshot older than their claims is open (a
// report, a backup, a session idle in transaction), so with one held open
// each claim walked every job claimed since: with a snapshot held for 60
// s at 10,000 jobs/s, claims slowed from about 1 ms to tens of
// milliseconds and the queue fell to half its rate (docs/benchmarks.md).
//
// So the store remembers, per queue, where its last claim of that queue
// ended in claim order, and its next claim of that queue alone starts
// claimFromSlack (in run_at) before there (sql/claim_ungrouped.sql
// rendered "from": a row comparison that is an index condition, so the
// scan begins there). It still reads the entries of the jobs claimed from
// that slack window: when one enqueue put many jobs at one run_at, those
// of the last such batch before the position, rather than every job
// claimed since the oldest open snapshot. A job can still
// become due ahead of the position: enqueued with a higher priority or an
// earlier run_at, released, retried, rescued or snoozed, or skipped while
// another claim held its row lock and then left pending. These rules make
// sure such a job is claimed:
//
//   - The slack: jobs of concurrent enqueues that began shortly
//     before the claimed job's (an enqueue's run_at is its transaction's
//     start) and committed after the claim are inside it.
//   - This store's own writes that may put a job ahead of a position (an
//     enqueue whose job lies beyond its reach, and every release,
//     failure, snooze, retry, rescue, resume, claim given back, schedule
//     firing or enqueue in a caller's transaction) make the next claim a
//     full one; a claim in flight meanwhile does not move the position,
//     and one that ends beyond the reach of a job this store enqueued
//     while it ran makes the next claim a full one.
//   - A full claim, from the head, runs whenever claimFullCostRatio times
//     as long as the last full claim took has passed since it began (at
//     most claimFullMax): full claims cost at most about
//     1/claimFullCostRatio of the claimer's time however many entries a
//     held snapshot keeps, and the positions are adaptive. In ordinary
//     running a full claim takes a millisecond or two, so a claim starts
//     from a position only when it follows the last full one within a few
//     tens of milliseconds (a busy drain), and a trickle's claims all start
//     at the head: claim order is exact across processes. Only while a
//     claim from the head is expensive (a held snapshot keeps many entries
//     ahead of the due jobs) do claims start from positions for longer.
//   - A positioned claim that comes back short (fewer jobs than asked
//     for) may have missed a job that another process put ahead of the
//     position, or one that became due there; the claimer then waits for
//     a wake-up or its poll. So the store wakes its claimers itself when
//     the next full claim is due (claimFrom.wake): a job another process
//     put ahead of a position waits at most claimFullCostRatio times as
//     long as a full claim takes, whatever the poll interval.
//
// Claims of several queues at once, and grouped claims (sql/claim.sql, when
// a group has a due ready mark), always start at the head. SQLite has no
// dead index entries to walk (it deletes them with the row), so its store
// has no positions.
const (
	claimFullCostRatio = 20
	claimFullMax       = 10 * time.Second
	claimFromSlack     = 100 * time.Millisecond
)

// claimPosition is a job's place in claim order.
type claimPosition struct {
	priority int
	runAt    time.Time
	id       int64
}

// before reports whether p comes before q in claim order.
func (p claimPosition) before(q claimPosition) bool {
	if p.priority != q.priority {
		return p.priority < q.priority
	}
	if !p.runAt.Equal(q.runAt) {
		return p.runAt.Before(q.runAt)
	}
	return p.id < q.id
}

// reaches reports whether a claim that starts at the position p (at its
// priority and its run_at less claimFromSlack) reads q.
func (p claimPosition) reaches(q claimPosition) bool {
	return !q.before(claimPosition{priority: p.priority, runAt: p.runAt.Add(-claimFromSlack)})
}

func positionOf(j *readpast.Job) claimPosition {
	return claimPosition{priority: j.Priority, runAt: j.RunAt, id: j.ID}
}

// claimFrom holds the store's positions, one per queue.
type claimFrom struct {
	mu     sync.Mutex
	queues map[string]*queuePosition
	// fullEvery, when set (by tests), replaces claimInterval.
	fullEvery time.Duration
	// onAhead, when set (by tests, before use), is called as ahead
	// begins: a stall there replays a wake-up racing the full claim.
	onAhead func()
	// wake, when set (by New, before use), wakes the store's claimers
	// (see claimed).
	wake func()
}

// enqueueLog is how many of a queue's latest enqueues the store
// remembers, for the claims in flight while they committed.
const enqueueLog = 16

// queuePosition is where the claims of one queue stand.
type queuePosition struct {
	at   claimPosition // the last ungrouped job claimed
	set  bool          // at holds a position
	full fullSchedule  // when the next full claim is due
	// fulls counts the full claims begun and the writes that put jobs
	// ahead: a claim that overlapped a later one does not move the
	// position (a positioned claim that ends after a full one would move
	// it past jobs the full one left).
	fulls uint64
	// enqueues counts this store's enqueues of ungrouped jobs of the
	// queue; enqueued holds the first job of the latest ones, by count
	// modulo enqueueLog. A claim in flight while one committed may not
	// have seen it: it must not leave the position past that job's reach.
	enqueues uint64
	enqueued [enqueueLog]claimPosition
	// wokeFor is the full claim (its start, full.at) whose successor a
	// short positioned claim has asked a wake-up for: one per full claim.
	wokeFor time.Time
}

// claimStart is where a claim begins, and what it saw of its queue.
type claimStart struct {
	queue      *queuePosition
	positioned bool
	from       claimPosition // with positioned: the position it starts at
	began      time.Time
	limit      int // how many jobs the claim asks for
	fulls      uint64
	enqueues   uint64
}

// args are the claim routine's last two arguments: where the claim starts
// (the position's priority, and its run_at less claimFromSlack), or NULLs
// for a claim from the head.
func (c claimStart) args() []any {
	if !c.positioned {
		return []any{nil, nil}
	}
	return []any{int32(c.from.priority), c.from.runAt.Add(-claimFromSlack)}
}

// start says where a claim of up to limit jobs of queues, beginning at
// now, starts.
func (c *claimFrom) start(queues []string, limit int, now time.Time) claimStart {
	st := claimStart{began: now, limit: limit}
	if len(queues) != 1 {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[queues[0]]
	if q == nil {
		if c.queues == nil {
			c.queues = map[string]*queuePosition{}
		}
		q = &queuePosition{}
		c.queues[queues[0]] = q
	}
	st.queue = q
	if !q.set {
		q.full.force()
	}
	if q.full.due(now, c.interval(q.full.took)) {
		q.fulls++
	} else {
		st.positioned, st.from = true, q.at
	}
	st.fulls, st.enqueues = q.fulls, q.enqueues
	return st
}

// claimInterval is the longest time between two full claims of a queue
// whose last full claim took took: claimFullCostRatio times took, up to
// claimFullMax, or fullEvery when a test set it.
func (c *claimFrom) interval(took time.Duration) time.Duration {
	if c.fullEvery != 0 {
		return c.fullEvery
	}
	return min(claimFullCostRatio*took, claimFullMax)
}

// fullInterval is the longest time between two full lease-expiry scans
// when the last one took took: rescueFullEvery, or claimFullCostRatio
// times took when that is longer, up to claimFullMax.
func fullInterval(took time.Duration) time.Duration {
	return min(max(rescueFullEvery, claimFullCostRatio*took), claimFullMax)
}

// fullSchedule says when a scan must start at the head (a full claim, or
// a lease-expiry scan from the oldest lease) rather than at a position.
type fullSchedule struct {
	at time.Time // when the last full scan began; zero: the next one is
	// took is how long the last two full scans took, the shorter: a
	// single slow one (the first on a new server session, which plans
	// the statement; a pause of the process) does not space the next
	// ones out, while a held snapshot, which slows every one, does.
	took time.Duration
	last time.Duration // how long the last one took
}

// due reports whether a scan beginning at now is a full one: every has
// passed since the last began. If so, it is recorded as begun.
func (f *fullSchedule) due(now time.Time, every time.Duration) bool {
	if !f.at.IsZero() && now.Sub(f.at) < every {
		return false
	}
	f.at = now
	return true
}

// ended records the end of a full scan that began at began (failed ones
// too: a held snapshot may make them time out), unless a later one began.
// Until two have ended, took stays zero.
func (f *fullSchedule) ended(began time.Time) {
	if f.at.Equal(began) {
		d := time.Since(began)
		f.took, f.last = min(d, f.last), d
	}
}

// force makes the next scan a full one.
func (f *fullSchedule) force() { f.at = time.Time{} }

// claimed records what a claim that began as st returned: jobs, in claim
// order (none when it failed).
func (c *claimFrom) claimed(st claimStart, jobs []*readpast.Job) {
	q := st.queue
	if q == nil {
		return
	}
	var last *readpast.Job
	for _, j := range jobs {
		if j.Group == nil {
			last = j
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !st.positioned {
		q.full.ended(st.began)
	} else if len(jobs) < st.limit {
		c.wakeAtFull(q)
	}
	if last == nil || q.fulls != st.fulls {
		// Nothing ungrouped came back (everything due lies after the
		// position, or was locked by other claims, which a full claim
		// finds if they leave it pending), or a full claim began, or
		// this store put jobs ahead, while this claim ran.
		return
	}
	next := positionOf(last)
	if st.positioned && (!q.set || !q.at.before(next)) {
		return // a positioned claim only moves the position on
	}
	if q.enqueues-st.enqueues > enqueueLog {
		q.full.force() // more enqueues than remembered: look from the head
		return
	}
	for n := st.enqueues + 1; n <= q.enqueues; n++ {
		if !next.reaches(q.enqueued[n%enqueueLog]) {
			q.full.force() // a job that committed during the claim lies beyond its reach
			return
		}
	}
	q.at, q.set = next, true
}

// wakeAtFull wakes the store's claimers when the next full claim of q is
// due, or at once if it is due already, unless one was asked for since the
// last full claim began: a positioned claim of q came back short, and the
// claimer may wait for its poll when a job lies ahead of the position.
// c.mu is held.
func (c *claimFrom) wakeAtFull(q *queuePosition) {
	if c.wake == nil || q.full.at.IsZero() || q.wokeFor.Equal(q.full.at) {
		return
	}
	q.wokeFor = q.full.at
	time.AfterFunc(max(time.Until(q.full.at.Add(c.interval(q.full.took))), 0), c.wake)
}

// enqueued records jobs this store just committed: a queue whose position
// a job lies ahead of (beyond the reach of a claim from there) gets a full
// claim next.
func (c *claimFrom) enqueued(jobs []*readpast.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	type first struct {
		q *queuePosition
		p claimPosition
	}
	var buf [4]first
	firsts := buf[:0] // per queue, its first job here (a call's jobs are mostly of one queue)
	for _, j := range jobs {
		q := c.queues[j.Queue]
		if j.Group != nil || q == nil {
			continue
		}
		p := positionOf(j)
		i := 0
		for i < len(firsts) && firsts[i].q != q {
			i++
		}
		switch {
		case i == len(firsts):
			firsts = append(firsts, first{q, p})
		case p.before(firsts[i].p):
			firsts[i].p = p
		}
	}
	for _, f := range firsts {
		q := f.q
		q.enqueues++
		q.enqueued[q.enqueues%enqueueLog] = f.p
		if q.set && !q.at.reaches(f.p) {
			q.full.force()
			q.fulls++
		}
	}
}

// ahead makes the next claim of every queue a full one: this store made
// jobs pending that it cannot place (release, failure, snooze, retry,
// rescue, resume, a claim given back, an enqueue in a caller's
// transaction).
func (c *claimFrom) ahead() {
	if c.onAhead != nil {
		c.onAhead()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.queues {
		q.full.force()
		q.fulls++
	}
}

// pendingAgain follows a write of this store that made jobs pending at
// places it cannot tell from a position (ahead): the next claim of every
// queue is a full one, and only then are the waiting claimers woken, so
// that none they wake starts at a position past those jobs. The writes
// also defer ahead, for the errors after which they may have committed.
func (s *Store) pendingAgain() {
	s.claimFrom.ahead()
	s.hub.Broadcast()
}

// The lease-expiry scan (RescueExpired, every 250 ms from RunRescuer)
// reads the lease index from its oldest entry up to now(), and the
// entries of finished jobs whose lease would have expired stay there while
// a snapshot older than them is open: with the default 30 s lease, once a
// snapshot has been held for longer than a lease, every scan walked the
// jobs claimed more than a lease ago. So the store remembers where its
// last complete scan stood (the server's now(), less rescueFromSlack) and
// reads only the entries after it: a lease that expired before that was
// seen expired by that scan, and ended, unless its row was locked by
// another transaction that then left it running (a completion rolled
// back), or its claim committed more than a lease plus rescueFromSlack
// after it read the clock. For those, a full scan runs at
// least every rescueFullEvery, or claimFullCostRatio times as long as the
// last one took when that is longer (fullInterval).
const (
	rescueFromSlack = time.Second
	rescueFullEvery = time.Second
)

// rescueFrom is where the store's next lease-expiry scan starts.
type rescueFrom struct {
	mu    sync.Mutex
	after time.Time    // scans read the leases that expired after this
	full  fullSchedule // when the next full scan is due
	// fullEvery, when set (by tests), replaces fullInterval.
	fullEvery time.Duration
}

// every is how long after a full scan the next one is due.
func (r *rescueFrom) every() time.Duration {
	if r.fullEvery != 0 {
		return r.fullEvery
	}
	return fullInterval(r.full.took)
}

// start says where a scan beginning at now starts: after the returned
// lease expiry, or at the oldest (ok false).
func (r *rescueFrom) start(now time.Time) (after time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.after.IsZero() {
		r.full.force()
	}
	if r.full.due(now, r.every()) {
		return time.Time{}, false
	}
	return r.after, true
}

// scanned records a scan that began at began, started after a position
// or at the oldest lease (positioned), ended n of at most limit expired
// claims, and ran at the server's time at.
func (r *rescueFrom) scanned(positioned bool, began time.Time, n, limit int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !positioned {
		r.full.ended(began)
	}
	if n >= limit {
		return // more may have expired before at: the next scan starts where this one did
	}
	if next := at.Add(-rescueFromSlack); next.After(r.after) {
		r.after = next
	}
}
