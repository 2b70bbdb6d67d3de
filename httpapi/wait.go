package httpapi

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/readpast/readpast"
)

// Bounds on the claims waiting requests make, whatever their number.
const (
	// maxProbes is how many turns (claims made for waiting requests) may
	// be in flight at once.
	maxProbes = 4
	// maxPollsPerTick is how many queue sets the fallback poll looks at per
	// poll interval; with more, each is looked at less often.
	maxPollsPerTick = 16
)

// waiters lets long-polling claims share the store's wake-ups and one
// fallback poll, so that what idle waiting requests cost the database does
// not grow with their number.
//
// Waiting claims for the same set of queues form a group. A request that
// joins a group claims once on arrival, unless the group looked less than
// a poll interval ago and found nothing (see claimFirst). Then the group's
// waiters take turns, oldest first: a wake-up from the store (any job may
// have become claimable) or the fallback poll (every poll interval, for
// jobs that become claimable without one, such as a run_at passing) gives
// the turn to the group's oldest waiter, which claims. When it gets every
// job it asked for it leaves and the next waiter claims at once, as more
// jobs may be waiting; when it gets fewer or none, the group waits for the
// next wake-up or poll. So one
// claim is in flight per group at most, at most maxProbes in all, and the
// fallback poll makes at most one claim per group per interval and
// maxPollsPerTick per interval overall.
//
// A goroutine runs the turns while anyone waits, holding one store
// subscription; it ends when the last waiter leaves.
type waiters struct {
	store readpast.Store
	poll  time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	groups map[string]*waitGroup // by queue set; protected by mu
	stop   context.CancelFunc    // ends the running dispatcher; protected by mu
	ready  chan struct{}         // closed once the dispatcher is subscribed; protected by mu
	kick   chan struct{}         // one slot: turns may be due
}

// waitGroup is the waiters for one set of queues.
type waitGroup struct {
	key       string
	queue     []*waiter // oldest first
	holder    *waiter   // holds the turn: claiming, or about to
	claiming  int       // claims of its waiters in flight, for a turn or on their own
	due       bool      // give a turn as soon as possible
	lastProbe time.Time // when the group last learned its queues' state
	idleSince time.Time // when its last waiter left, while it has none
}

// waiter is one waiting claim.
type waiter struct {
	g    *waitGroup
	turn chan struct{} // one slot: claim now
}

func newWaiters(store readpast.Store, poll time.Duration, log *slog.Logger) *waiters {
	return &waiters{store: store, poll: poll, log: log, groups: map[string]*waitGroup{}, kick: make(chan struct{}, 1)}
}

// groupKey names a set of queues whatever their order and repeats.
func groupKey(queues []string) string {
	qs := slices.Clone(queues)
	slices.Sort(qs)
	return strings.Join(slices.Compact(qs), "\x00")
}

// join adds a waiter for queues. It returns once the store's wake-ups
// reach it, so that a claim the caller makes next and finds nothing
// cannot miss the wake-up of a job enqueued just after.
func (h *waiters) join(ctx context.Context, queues []string) *waiter {
	key := groupKey(queues)
	h.mu.Lock()
	g := h.groups[key]
	if g == nil {
		g = &waitGroup{key: key}
		h.groups[key] = g
	}
	w := &waiter{g: g, turn: make(chan struct{}, 1)}
	g.queue = append(g.queue, w)
	if h.stop == nil {
		dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		h.stop, h.ready = stop, make(chan struct{})
		go h.run(dctx, h.ready)
	}
	ready := h.ready
	h.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
	}
	return w
}

// claimFirst reports whether w, just joined, should claim before it waits:
// unless its group looked at its queues less than a poll interval ago,
// found nothing, and has had no wake-up since. Requests that arrive while
// others wait for the same queues then cost the database nothing more
// than the waiting ones do.
func (h *waiters) claimFirst(w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := w.g
	return g.due || g.lastProbe.IsZero() || time.Since(g.lastProbe) >= h.poll
}

// claiming records that w begins a claim, for its turn or on its own.
// While a claim of a group is in flight, no turn is handed out in it: a
// wake-up that comes meanwhile, for a job that claim may not see, leaves
// the group due, and a turn goes out once the claim is done. (Handed to a
// waiter whose own claim was in flight, the turn was used up by that
// claim, and a job committed after its statement waited for the poll.)
// What made the group due before now (a wake-up, the poll, a claim that
// got all it asked for, a failed claim, a turn left unused) asks for a
// look at the queues that starts after it, which this claim is: its
// statement begins once this returns, and a store wakes its claimers only
// once what it announces is committed (on SQLite, a write in the
// caller's transaction wakes them when that transaction ends,
// TestWaitingClaimsGetAJobEnqueuedInTheCallersTx). So the claim clears it; a
// request that claims on arrival in a group woken while no one waited
// then waits without a second, empty, claim for the same wake-up
// (TestArrivalClaimAnswersTheWakeUp). For the same reason it uses up a
// turn handed to w between its join and its claim on arrival
// (TestClaimOnArrivalAnswersAnEarlierTurn).
func (h *waiters) claiming(w *waiter) {
	h.mu.Lock()
	w.g.claiming++
	w.g.due = false
	select {
	case <-w.turn:
	default:
	}
	h.mu.Unlock()
}

// done records that w claimed (for its turn, or on its own), whether the
// claim failed, and whether more may be claimable: it got every job it
// asked for. Then the next
// waiter of the group claims at once. A claim that got fewer found the
// queues drained as of its statement; a job that becomes claimable after
// that wakes the group (markAll), also while this claim is in flight, and
// one that a keyed claim passed over is looked for again by the store
// (postgres/claimmore.go), which wakes it too. Claiming at once after such
// a claim finds nothing: with one job enqueued at a time, every job cost
// a second, empty, claim.
func (h *waiters) done(w *waiter, more, failed bool) {
	h.mu.Lock()
	g := w.g
	g.claiming--
	if g.holder == w {
		g.holder = nil
	}
	g.lastProbe = time.Now()
	if failed {
		// It learned nothing, and may have used up a wake-up's turn: the
		// next waiter claims at once (a failed request answers and
		// leaves, so failures do not go round), and one that joins claims
		// first, as in a group made anew.
		g.lastProbe, g.due = time.Time{}, true
	}
	if more {
		g.due = true
	}
	h.mu.Unlock()
	h.poke()
}

// leave removes w. A turn it held and did not use passes on.
func (h *waiters) leave(w *waiter) {
	h.mu.Lock()
	g := w.g
	if i := slices.Index(g.queue, w); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	if g.holder == w {
		g.holder, g.due = nil, true
	}
	if len(g.queue) == 0 && g.holder == nil {
		// Kept for about a poll interval (prune), with what it last learned
		// and the wake-ups it gets meanwhile: a worker that took a job
		// asks again at once, and a group made anew would claim before
		// it waits, finding nothing when no job came since.
		g.idleSince = time.Now()
		time.AfterFunc(h.poll, h.poke) // prune it then
	}
	h.mu.Unlock()
	h.poke()
}

// prune drops the groups that have had no waiter for a poll interval, and
// ends the dispatcher (cancel) when none is left. It reports whether the
// dispatcher ends.
func (h *waiters) prune(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, g := range h.groups {
		if len(g.queue) == 0 && g.holder == nil && g.claiming == 0 && now.Sub(g.idleSince) >= h.poll {
			delete(h.groups, key)
		}
	}
	if len(h.groups) > 0 || h.stop == nil {
		return false
	}
	h.stop()
	h.stop, h.ready = nil, nil
	return true
}

// poke wakes the dispatcher without blocking.
func (h *waiters) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run gives out turns until ctx ends, on the store's wake-ups and every
// poll interval. It closes ready once subscribed.
func (h *waiters) run(ctx context.Context, ready chan struct{}) {
	var wake <-chan struct{}
	if n, ok := h.store.(readpast.Notifier); ok {
		ch, err := n.Subscribe(ctx)
		if err != nil {
			h.log.WarnContext(ctx, "claim: subscribe to wake-ups; polling only", slog.Any("error", err))
		} else {
			wake = ch
		}
	}
	close(ready)
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-wake:
			if !ok {
				wake = nil // the store closed: polls only
				continue
			}
			h.markAll()
		case <-tick.C:
			h.markPolls()
		case <-h.kick:
		}
		if h.prune(time.Now()) {
			return
		}
		h.dispatch()
	}
}

// markAll marks every group due: a wake-up says nothing of which queues.
func (h *waiters) markAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.groups {
		g.due = true
	}
}

// markPolls marks due the groups the fallback poll should look at now: the
// ones not looked at since the last tick, least recently looked at first,
// at most maxPollsPerTick.
func (h *waiters) markPolls() {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Half an interval: a group looked at just after the last tick is due
	// again at this one.
	cutoff := time.Now().Add(-h.poll / 2)
	var stale []*waitGroup
	for _, g := range h.groups {
		// A group without waiters is kept only for what it learned
		// (prune); a waiter that joins it claims first once that is a
		// poll interval old (claimFirst).
		if !g.due && g.holder == nil && len(g.queue) > 0 && !g.lastProbe.After(cutoff) {
			stale = append(stale, g)
		}
	}
	slices.SortFunc(stale, func(a, b *waitGroup) int { return a.lastProbe.Compare(b.lastProbe) })
	for _, g := range stale[:min(len(stale), maxPollsPerTick)] {
		g.due = true
	}
}

// dispatch gives the turn to the oldest waiter of each due group that has
// no claim in flight, while fewer than maxProbes are.
func (h *waiters) dispatch() {
	h.mu.Lock()
	defer h.mu.Unlock()
	inFlight := 0
	for _, g := range h.groups {
		if g.holder != nil {
			inFlight++
		}
	}
	for _, g := range h.groups {
		if inFlight >= maxProbes {
			return
		}
		if !g.due || g.holder != nil || g.claiming > 0 || len(g.queue) == 0 {
			continue
		}
		w := g.queue[0]
		g.holder, g.due = w, false
		inFlight++
		select {
		case w.turn <- struct{}{}:
		default: // it has a turn waiting already
		}
	}
}
