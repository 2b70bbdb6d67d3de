package postgres

import (
	"sync"
	"time"
)

// Bounds of the wait before a store's claimers look again after a claim
// of keyed jobs that came back short while it passed over keyed jobs that
// may be claimable (claimedKeys).
const (
	claimMoreMin = 5 * time.Millisecond
	claimMoreMax = time.Second
)

// morePrefix starts a claim's note that it passed such a job over, with
// the job's id (sql/claim.sql, the passed and more CTEs).
const morePrefix = "more:"

// claimMore is when a store's claimers look again after a claim of keyed
// jobs came back short while other keys' due jobs remained: their ready
// marks were held by concurrent claims, or their rows by other
// transactions, so the claim passed them over, and the keys those claims
// serve are marked again when they commit, with no wake-up. A claimer
// that takes a short claim as the end of the backlog (the client's
// producer, the HTTP API's waiting claims) would otherwise sleep until its
// poll while jobs wait (docs/design/flow-control.md, "Claims that come
// back short").
//
// The wait doubles, from claimMoreMin to claimMoreMax, while the claims
// pass over the same job first (a key row a caller's transaction holds
// open keeps its mark due, whatever other jobs come and go), and starts
// again from claimMoreMin when they pass over another one. One look is
// set at a time: a claim whose look would come no sooner than the one
// set sets none, so the claims that other jobs' wake-ups make meanwhile
// do not each start a look of their own.
type claimMore struct {
	mu     sync.Mutex
	passed int64         // the job the last such claim passed over first
	wait   time.Duration // the wait set for it
	at     time.Time     // when the look set last comes
}

// next returns when to look again after a claim at now that passed over
// the job passed first, and false when the look already set comes no
// later.
func (c *claimMore) next(now time.Time, passed int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if passed != c.passed || c.wait == 0 {
		c.passed, c.wait = passed, claimMoreMin
	} else {
		c.wait = min(2*c.wait, claimMoreMax)
	}
	at := now.Add(c.wait)
	if c.at.After(now) && !at.Before(c.at) {
		return time.Time{}, false
	}
	c.at = at
	return at, true
}

// claimedKeys wakes the store's claimers again after a claim that came
// back short having passed over keyed jobs that may be claimable, the
// first of them passed.
func (s *Store) claimedKeys(passed int64) {
	if at, ok := s.more.next(time.Now(), passed); ok {
		s.due.At(at)
	}
}
