package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/readpast/readpast"
)

// Figures of the overview.
const (
	// window is how far back the overview's charts and finished counts go.
	window = time.Hour
	// busiestGroups is how many groups the overview lists.
	busiestGroups = 10
	// refreshTimeout bounds one refresh of the overview's figures.
	refreshTimeout = 30 * time.Second
	// quickRefresh: a page waits for a refresh in flight (up to
	// pageWait) only when the last one took less than this; otherwise it
	// shows the figures it has at once, and the live refresh brings the
	// new ones.
	quickRefresh = 100 * time.Millisecond
	pageWait     = 150 * time.Millisecond
)

// overview is one refresh of the overview's figures.
type overview struct {
	// At is when the refresh started: the figures are at least this new.
	At time.Time
	// Took is how long the refresh took.
	Took time.Duration
	// warmUp: the refresh made when the handler started. A page shows
	// these figures only when it cannot wait for newer ones.
	warmUp bool
	// Since is where the charts and finished counts start.
	Since   time.Time
	Queues  []readpast.QueueSummary
	Minutes []readpast.ActivityMinute
	Groups  []readpast.GroupLoad
	// A queue page's figures (queue.go) leave Queues empty, and have the
	// queue's due job that has waited longest (nil: none is due) and the
	// declared limits.
	Oldest *readpast.Job
	Limits []readpast.LimitInfo
}

// sampler keeps the overview's figures (or a queue page's), shared by
// every viewer. Counting
// the live jobs of a large queue takes a while (about 150 ms for a million
// on a small machine), so pages do not count: they show the latest
// figures, and ask for a refresh when those are older than the refresh
// interval, or ten times what the last refresh took, whichever is longer.
// At most one refresh runs at a time, and none runs unless someone looks
// (but for one when the handler starts, so that the first page has
// figures to show).
type sampler struct {
	// read fills in the figures of a refresh.
	read func(ctx context.Context, ov *overview) error
	log  *slog.Logger
	min  time.Duration
	now  func() time.Time

	// The queue pages' samplers share the overview's context and wait
	// group: closing the overview's stops them all.
	ctx    context.Context
	cancel context.CancelFunc
	wg     *sync.WaitGroup
	// queues keeps the queue pages' samplers (queue.go); nil in those.
	queues *queueSamplers

	mu  sync.Mutex
	cur *overview
	// err is the last refresh's error, nil once one succeeds.
	err error
	// dirty: figures from refreshes started before it are out of date (an
	// action changed something).
	dirty time.Time
	// warming: the refresh in flight is the warm-up.
	warming bool
	// patched: the figures were changed in place then (setPaused);
	// refreshes started before are dropped.
	patched time.Time
	// inflight is closed when the refresh in flight ends; nil when none.
	inflight chan struct{}
}

func newSampler(insp readpast.Inspector, log *slog.Logger, min time.Duration) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{log: log, min: min, now: time.Now, ctx: ctx, cancel: cancel, wg: new(sync.WaitGroup)}
	s.read = func(ctx context.Context, ov *overview) error {
		var wg sync.WaitGroup
		var errs [3]error
		wg.Go(func() { ov.Queues, errs[0] = insp.QueueSummaries(ctx, ov.Since) })
		wg.Go(func() { ov.Minutes, errs[1] = insp.Activity(ctx, ov.Since) })
		wg.Go(func() { ov.Groups, errs[2] = insp.BusiestGroups(ctx, busiestGroups) })
		wg.Wait()
		return errors.Join(errs[:]...)
	}
	s.queues = &queueSamplers{parent: s}
	return s
}

// child makes a sampler that reads with read and stops with s.
func (s *sampler) child(read func(ctx context.Context, ov *overview) error) *sampler {
	return &sampler{read: read, log: s.log, min: s.min, now: s.now, ctx: s.ctx, cancel: s.cancel, wg: s.wg}
}

// close stops the sampler and waits for a refresh in flight.
func (s *sampler) close() {
	s.cancel()
	s.wg.Wait()
}

// fresh reports whether the figures are recent enough to show without a
// refresh. The caller holds s.mu.
func (s *sampler) fresh() bool {
	if s.cur == nil || s.cur.warmUp || s.cur.At.Before(s.dirty) {
		return false
	}
	return s.now().Sub(s.cur.At) < max(s.min, 10*s.cur.Took)
}

// start starts a refresh unless one is in flight, and returns the channel
// closed when the refresh in flight ends. The caller holds s.mu.
func (s *sampler) start() <-chan struct{} {
	if s.inflight != nil {
		return s.inflight
	}
	done := make(chan struct{})
	if err := s.ctx.Err(); err != nil {
		// Closed: no refresh starts any more.
		s.err = err
		close(done)
		return done
	}
	s.inflight = done
	s.wg.Go(func() {
		ov, err := s.load()
		s.mu.Lock()
		defer s.mu.Unlock()
		if ov != nil {
			ov.warmUp, s.warming = s.warming, false
		}
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Warn("dashboard: refreshing the overview", slog.Any("error", err))
			}
			s.err = err
		} else if ov.At.Before(s.patched) {
			// Read before a change the figures already show: keep
			// those, and let the next refresh bring the rest.
			s.err = nil
		} else {
			s.cur, s.err = ov, nil
		}
		s.inflight = nil
		close(done)
	})
	return done
}

// load reads the figures, the reads at once.
func (s *sampler) load() (*overview, error) {
	ctx, cancel := context.WithTimeout(s.ctx, refreshTimeout)
	defer cancel()
	start := s.now()
	ov := &overview{At: start, Since: start.UTC().Truncate(time.Minute).Add(-window + time.Minute)}
	if err := s.read(ctx, ov); err != nil {
		return nil, err
	}
	ov.Took = s.now().Sub(start)
	return ov, nil
}

// get returns the figures to show. When they are not fresh it starts a
// refresh and waits for it, up to wait, or not at all when the last
// refresh was slow; then it returns the newest figures it has (nil before
// the first refresh) and the last refresh's error.
func (s *sampler) get(ctx context.Context, wait time.Duration) (*overview, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.fresh() {
		if s.cur != nil && s.cur.Took >= quickRefresh && wait <= pageWait {
			s.start()
			break
		}
		done := s.start()
		s.mu.Unlock()
		timedOut := false
		select {
		case <-done:
		case <-deadline.C:
			timedOut = true
		case <-ctx.Done():
			timedOut = true
		}
		s.mu.Lock()
		if timedOut || s.err != nil {
			break // out of time, or the refresh failed
		}
	}
	return s.cur, s.err
}

// setPaused shows a queue paused (since at) or resumed (at nil) in the
// figures at once, marks them out of date and starts a refresh, without
// waiting for it: counting the live jobs can take a while, and a pause
// changes no count.
func (s *sampler) setPaused(name string, at *time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.dirty, s.patched = now, now
	if s.cur != nil {
		// Pages render the figures without the lock: change a copy.
		ov := *s.cur
		ov.Queues = slices.Clone(ov.Queues)
		i, found := slices.BinarySearchFunc(ov.Queues, name, func(q readpast.QueueSummary, n string) int { return strings.Compare(q.Name, n) })
		if !found {
			ov.Queues = slices.Insert(ov.Queues, i, readpast.QueueSummary{Name: name})
		}
		ov.Queues[i].Paused, ov.Queues[i].PausedAt = at != nil, at
		s.cur = &ov
	}
	s.start()
}

// warmUp starts the first refresh, so that the first page has figures
// to show even when counting takes a while.
func (s *sampler) warmUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.warming = true
	s.start()
}

// touch marks the figures out of date and starts a refresh, without
// waiting for it: for an action whose next page does not show them.
func (s *sampler) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirty = s.now()
	s.start()
}

// latest returns the newest figures without waiting (nil before the first
// refresh).
func (s *sampler) latest() *overview {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh() {
		s.start()
	}
	return s.cur
}

// overviewData is what the overview shows.
type overviewData struct {
	// Figures are nil until the first refresh ends.
	Figures *overview
	// Err is why the figures could not be refreshed; they are older.
	Err error
	// Now is when the page was made.
	Now time.Time
	// Totals sums the queues.
	Totals              readpast.QueueSummary
	Throughput, Latency chart
	// Next is the path actions on the page come back to.
	Next string
	// Every is how often, in milliseconds, the page refreshes the figures.
	Every int64
	// CanWrite: the viewer may pause and resume queues.
	CanWrite bool
	CSRF     string
}

// overviewFor makes the overview's data from the sampler's figures.
func (h *Handler) overviewFor(r *http.Request, v *viewer, wait time.Duration) overviewData {
	ov, err := h.overview.get(r.Context(), wait)
	d := overviewData{Figures: ov, Err: err, Now: h.now(), Every: h.overview.min.Milliseconds(),
		Next: "/", CanWrite: v.CanWrite(), CSRF: v.csrf}
	if ov == nil {
		return d
	}
	for _, q := range ov.Queues {
		d.Totals.Pending += q.Pending
		d.Totals.Scheduled += q.Scheduled
		d.Totals.Running += q.Running
		d.Totals.Retrying += q.Retrying
		d.Totals.Succeeded += q.Succeeded
		d.Totals.Failed += q.Failed
		d.Totals.Cancelled += q.Cancelled
	}
	d.Throughput = throughputChart(ov.Since, ov.Minutes)
	d.Latency = latencyChart(ov.Since, ov.Minutes)
	return d
}

func (h *Handler) overviewPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	h.render(w, r, v, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: h.overviewFor(r, v, pageWait)})
}

// overviewLive serves the overview's live part alone, which the page's
// script fetches every few seconds and swaps in.
func (h *Handler) overviewLive(w http.ResponseWriter, r *http.Request, v *viewer) {
	h.renderPart(w, r, "overview", "live", h.overviewFor(r, v, pageWait))
}
