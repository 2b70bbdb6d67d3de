package dashboard

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/readpast/readpast"
)

// maxQueueSamplers bounds how many queue pages keep figures: past it, the
// page viewed least lately loses its figures (its next view counts anew).
const maxQueueSamplers = 64

// queueSamplers keeps a sampler per queue page viewed lately: a queue's
// page reads its activity, busiest groups, oldest due job and the limits
// in a refresh shared by everyone looking, as the overview does, never on
// every request.
type queueSamplers struct {
	parent *sampler
	mu     sync.Mutex
	m      map[string]*queueSampler
}

type queueSampler struct {
	*sampler
	used time.Time
}

// get returns the sampler of queue name, made to read with read when the
// queue has none.
func (qs *queueSamplers) get(name string, read func(context.Context, *overview) error) *sampler {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.m == nil {
		qs.m = map[string]*queueSampler{}
	}
	e, ok := qs.m[name]
	if !ok {
		if len(qs.m) >= maxQueueSamplers {
			least := ""
			for n, c := range qs.m {
				if least == "" || c.used.Before(qs.m[least].used) {
					least = n
				}
			}
			delete(qs.m, least)
		}
		e = &queueSampler{sampler: qs.parent.child(read)}
		qs.m[name] = e
	}
	e.used = qs.parent.now()
	return e.sampler
}

// queueRead reads the figures of queue name's page, the reads at once.
func (h *Handler) queueRead(name string) func(context.Context, *overview) error {
	return func(ctx context.Context, ov *overview) error {
		var wg sync.WaitGroup
		var errs [4]error
		wg.Go(func() { ov.Minutes, errs[0] = h.insp.QueueActivity(ctx, name, ov.Since) })
		wg.Go(func() { ov.Groups, errs[1] = h.insp.QueueGroups(ctx, name, busiestGroups) })
		wg.Go(func() { ov.Oldest, errs[2] = h.insp.OldestDueJob(ctx, name) })
		wg.Go(func() { ov.Limits, errs[3] = h.store.ListLimits(ctx) })
		wg.Wait()
		return errors.Join(errs[:]...)
	}
}

// queueData is what a queue's page shows.
type queueData struct {
	Name string
	// Summary is the queue's line of the overview's figures (Counts): its
	// counts and whether it is paused. Figures are the page's own: the
	// charts, the busiest groups and the oldest due job. Either is nil
	// until its first refresh ends.
	Summary         readpast.QueueSummary
	Counts, Figures *overview
	// Err is why the figures could not be refreshed; they are older.
	Err                 error
	Now                 time.Time
	Throughput, Latency chart
	Groups              []queueGroup
	// Live is the address of the page's live part; Next the page's own,
	// which its actions come back to.
	Live template.URL
	Next string
	// Every is how often, in milliseconds, the page refreshes the figures.
	Every    int64
	CanWrite bool
	CSRF     string
}

// queueGroup is one of the queue's busiest groups, with what governs it.
type queueGroup struct {
	readpast.GroupLoad
	// Declared is the limit that governs the group's key (the key's own
	// or the longest template it matches); HasLimit is false when none
	// does, and the key runs one job at a time.
	Declared readpast.Limit
	HasLimit bool
	// Bucket is the key's state as the declared limit lists it; nil when
	// the key has no bucket (it has not run lately).
	Bucket *readpast.KeyState
}

// LimitText says what the declared limit allows.
func (g queueGroup) LimitText() string { return limitText(g.Declared) }

// LimitURL is the limits page, at the declared limit.
func (g queueGroup) LimitURL() template.URL {
	return template.URL("/limits#limit-" + url.PathEscape(g.Declared.Key))
}

// queueURL is the address of a queue's page.
func queueURL(name string) template.URL { return template.URL("/queues/" + url.PathEscape(name)) }

// queueFor makes a queue page's data: the counts from the overview's
// figures, the rest from the queue's own, waiting for both at once.
func (h *Handler) queueFor(r *http.Request, v *viewer, name string, wait time.Duration) queueData {
	d := queueData{Name: name, Now: h.now(), Every: h.overview.min.Milliseconds(), Next: string(queueURL(name)),
		Live: queueURL(name) + "/live", CanWrite: v.CanWrite(), CSRF: v.csrf}
	d.Summary.Name = name
	qs := h.overview.queues.get(name, h.queueRead(name))
	var wg sync.WaitGroup
	var errs [2]error
	wg.Go(func() { d.Counts, errs[0] = h.overview.get(r.Context(), wait) })
	wg.Go(func() { d.Figures, errs[1] = qs.get(r.Context(), wait) })
	wg.Wait()
	d.Err = errors.Join(errs[:]...)
	if d.Counts != nil {
		if i, ok := slices.BinarySearchFunc(d.Counts.Queues, name, func(q readpast.QueueSummary, n string) int {
			return strings.Compare(q.Name, n)
		}); ok {
			d.Summary = d.Counts.Queues[i]
		}
	}
	if f := d.Figures; f != nil {
		d.Throughput = throughputChart(f.Since, f.Minutes)
		d.Latency = latencyChart(f.Since, f.Minutes)
		d.Throughput.Label = "Queue " + name + ": " + d.Throughput.Label
		d.Latency.Label = "Queue " + name + ": " + d.Latency.Label
		d.Groups = groupsWithLimits(f.Groups, f.Limits)
	}
	return d
}

// groupsWithLimits pairs each group with the declared limit that governs
// its key, and the key's bucket when the limit lists it.
func groupsWithLimits(groups []readpast.GroupLoad, infos []readpast.LimitInfo) []queueGroup {
	limits := make([]readpast.Limit, len(infos))
	for i, li := range infos {
		limits[i] = li.Limit
	}
	out := make([]queueGroup, 0, len(groups))
	for _, g := range groups {
		qg := queueGroup{GroupLoad: g}
		qg.Declared, qg.HasLimit = readpast.MatchLimit(limits, g.Group)
		for _, li := range infos {
			if !qg.HasLimit || li.Key != qg.Declared.Key {
				continue
			}
			for i := range li.Keys {
				if li.Keys[i].Key == g.Group {
					qg.Bucket = &li.Keys[i]
				}
			}
		}
		out = append(out, qg)
	}
	return out
}

// queueKnown reports whether queue name has jobs or is paused: it is in
// the overview's figures, or the store lists it (any job, finished long
// ago too).
func (h *Handler) queueKnown(ctx context.Context, name string) (bool, error) {
	if readpast.CheckQueue(name) != nil {
		return false, nil
	}
	if ov := h.overview.latest(); ov != nil {
		for _, q := range ov.Queues {
			if q.Name == name {
				return true, nil
			}
		}
	}
	qs, err := h.store.Queues(ctx)
	if err != nil {
		return false, err
	}
	for _, q := range qs {
		if q.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// queueOK answers with a 404 page when queue name is not known, and
// reports whether it is.
func (h *Handler) queueOK(w http.ResponseWriter, r *http.Request, v *viewer, name string) bool {
	ok, err := h.queueKnown(r.Context(), name)
	if err != nil {
		h.storeError(w, r, v, err)
		return false
	}
	if !ok {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such queue: no job has ever been in it.")
	}
	return ok
}

// queuePage shows one queue: its counts, charts, busiest groups with
// their limits, its oldest due job, and pause or resume.
func (h *Handler) queuePage(w http.ResponseWriter, r *http.Request, v *viewer) {
	name := r.PathValue("name")
	if !h.queueOK(w, r, v, name) {
		return
	}
	h.render(w, r, v, http.StatusOK, "queue", page{Title: "Queue " + name, Data: h.queueFor(r, v, name, pageWait)})
}

// queueLive serves the queue page's live part alone, which the page's
// script fetches every few seconds and swaps in.
func (h *Handler) queueLive(w http.ResponseWriter, r *http.Request, v *viewer) {
	name := r.PathValue("name")
	if !h.queueOK(w, r, v, name) {
		return
	}
	h.renderPart(w, r, "queue", "live", h.queueFor(r, v, name, pageWait))
}
