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
// just before there (sql/claim_ungrouped.sql rendered "from": a row
// comparison that is an index condition, so the scan begins at the
// position). A job can still become due ahead of the position: enqueued
// with a higher priority or an earlier run_at, released, retried,
// rescued or snoozed, or skipped while another claim held its row lock
// and then left pending. Three rules make sure such a job is claimed:
//
//   - The position is moved back by claimFromSlack in run_at, so jobs
//     enqueued by transactions that began shortly before the claimed
//     job's (concurrent enqueues, whose run_at is their transaction's
//     start) are inside the scan.
//   - This store's own writes that may put a job ahead of a position (an
//     enqueue whose job lies ahead of it, and every release, failure,
//     snooze, retry, rescue, resume or enqueue in a caller's transaction)
//     make the next claim a full one. So one process sees claim order
//     exactly as without positions.
//   - A full claim, from the head, runs at least every claimFullEvery, or
//     every claimFullCostRatio times as long as the last full claim took
//     when that is longer (at most claimFullMax): a job that another
//     process put ahead of a position waits that long at most. Full claims
//     then cost at most about 1/claimFullCostRatio of the claimer's time
//     however many entries a held snapshot keeps.
//
// Claims of several queues at once, and grouped claims (sql/claim.sql, when
// a group has a due ready mark), always start at the head. SQLite has no
// dead index entries to walk (it deletes them with the row), so its store
// has no positions.
const (
	claimFullEvery     = time.Second
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

func positionOf(j *readpast.Job) claimPosition {
	return claimPosition{priority: j.Priority, runAt: j.RunAt, id: j.ID}
}

// claimFrom holds the store's positions, one per queue.
type claimFrom struct {
	mu     sync.Mutex
	queues map[string]*queuePosition
	// fullEvery, when set (by tests), replaces fullInterval.
	fullEvery time.Duration
}

// queuePosition is where the claims of one queue stand.
type queuePosition struct {
	at       claimPosition // the last ungrouped job claimed
	set      bool          // at holds a position
	fullAt   time.Time     // when the last full claim began
	fullTook time.Duration // how long it took
}

// start says where a claim of queues, beginning at now, starts: after the
// returned position, or at the head (ok false).
func (c *claimFrom) start(queues []string, now time.Time) (from claimPosition, ok bool) {
	if len(queues) != 1 {
		return claimPosition{}, false
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
	every := c.fullEvery
	if every == 0 {
		every = fullInterval(q.fullTook)
	}
	if !q.set || now.Sub(q.fullAt) >= every {
		q.fullAt = now
		return claimPosition{}, false
	}
	return q.from(), true
}

// fullInterval is the longest time between two full claims of a queue
// whose last full claim took took: claimFullEvery, or claimFullCostRatio
// times took when that is longer, up to claimFullMax.
func fullInterval(took time.Duration) time.Duration {
	return min(max(claimFullEvery, claimFullCostRatio*took), claimFullMax)
}

// from is where a positioned claim starts: claimFromSlack before the last
// job claimed.
func (q *queuePosition) from() claimPosition {
	return claimPosition{priority: q.at.priority, runAt: q.at.runAt.Add(-claimFromSlack)}
}

// claimed records a claim of queues that began at began, started after a
// position or at the head (positioned), and returned jobs (in claim order).
func (c *claimFrom) claimed(queues []string, positioned bool, began time.Time, jobs []*readpast.Job) {
	if len(queues) != 1 {
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
	q := c.queues[queues[0]]
	if q == nil {
		return
	}
	if !positioned && q.fullAt.Equal(began) {
		q.fullTook = time.Since(began)
	}
	switch {
	case last == nil:
		// Nothing ungrouped came back: everything due lies after the
		// position, or was locked by other claims, whose jobs will
		// be claimed or come back ahead of it (and then a full claim
		// finds them).
	case !positioned:
		// A full claim ends the position where it stopped, even before
		// the old one: jobs may remain between the two.
		q.at, q.set = positionOf(last), true
	case !q.set || q.at.before(positionOf(last)):
		q.at, q.set = positionOf(last), true
	}
}

// enqueued makes the next claim of a queue a full one when one of jobs,
// just committed, lies ahead of that queue's position.
func (c *claimFrom) enqueued(jobs []*readpast.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range jobs {
		if j.Group != nil {
			continue
		}
		if q := c.queues[j.Queue]; q != nil && q.set && positionOf(j).before(q.from()) {
			q.fullAt = time.Time{}
		}
	}
}

// ahead makes the next claim of every queue a full one: this store made
// jobs pending it cannot place (release, failure, snooze, retry, rescue,
// resume, an enqueue in a caller's transaction).
func (c *claimFrom) ahead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.queues {
		q.fullAt = time.Time{}
	}
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
// after it read the clock. For those, a full scan runs as often as a full
// claim does (fullInterval).
const rescueFromSlack = time.Second

// rescueFrom is where the store's next lease-expiry scan starts.
type rescueFrom struct {
	mu       sync.Mutex
	after    time.Time // scans read the leases that expired after this
	fullAt   time.Time // when the last full scan began
	fullTook time.Duration
	// fullEvery, when set (by tests), replaces fullInterval.
	fullEvery time.Duration
}

// start says where a scan beginning at now starts: after the returned
// lease expiry, or at the oldest (ok false).
func (r *rescueFrom) start(now time.Time) (after time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	every := r.fullEvery
	if every == 0 {
		every = fullInterval(r.fullTook)
	}
	if r.after.IsZero() || now.Sub(r.fullAt) >= every {
		r.fullAt = now
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
	if !positioned && r.fullAt.Equal(began) {
		r.fullTook = time.Since(began)
	}
	if n >= limit {
		return // more may have expired before at: the next scan starts where this one did
	}
	if next := at.Add(-rescueFromSlack); next.After(r.after) {
		r.after = next
	}
}
