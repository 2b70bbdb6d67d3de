package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// The Retries view lists up to retriesShown jobs, newest failure first.
// An action takes at most maxRetriesSelected of them at once, and its
// message names at most retriesNamed of those it could not act on.
const (
	retriesShown       = 100
	maxRetriesSelected = 1000
	retriesNamed       = 10
)

// retriesURL is the Retries view, of one queue or ("") of every queue.
func retriesURL(queue string) template.URL {
	if queue == "" {
		return "/retries"
	}
	return template.URL("/retries?" + url.Values{"queue": {queue}}.Encode())
}

// retriesData is what the Retries view shows.
type retriesData struct {
	// Queue filters the view; Queues names the known queues, for the
	// filter's suggestions.
	Queue  string
	Queues []string
	// Problem says what is wrong with the filter, if anything.
	Problem string
	Rows    []retryRow
	// Partial: more jobs were retrying than one view reads (Scan), so
	// some that failed lately may be missing.
	Partial bool
	Scan    int
	// Total is how many jobs are retrying (in Queue), from the overview's
	// figures (at least the rows shown); More: more than the rows shown.
	Total    int64
	More     bool
	CanWrite bool
	CSRF     string
	Next     string
	Now      time.Time
}

// retryRow is one retrying job.
type retryRow struct {
	*readpast.Job
	URL template.URL
	// Last is its latest failed attempt.
	Last readpast.AttemptError
}

// retriesPage lists the jobs waiting to run again after a failed attempt,
// newest failure first, with their latest error, attempt and next try,
// and (with full access) retry now and give up, for one or a selection.
func (h *Handler) retriesPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	d := retriesData{Queue: strings.TrimSpace(q.Get("queue")), Scan: readpast.DefaultRetryingScan,
		CanWrite: v.CanWrite(), CSRF: v.csrf, Now: h.now()}
	d.Next = string(retriesURL(d.Queue))
	if ov := h.overview.latest(); ov != nil {
		for _, qs := range ov.Queues {
			d.Queues = append(d.Queues, qs.Name)
			if d.Queue == "" || qs.Name == d.Queue {
				d.Total += qs.Retrying
			}
		}
	}
	res, err := h.insp.Retrying(r.Context(), readpast.RetryingParams{Queue: d.Queue, Limit: retriesShown, Scan: d.Scan})
	var fe *readpast.FieldError
	switch {
	case errors.As(err, &fe):
		d.Problem = fmt.Sprintf("The %s is not valid: %s.", fe.Field, fe.Message)
	case err != nil:
		h.storeError(w, r, v, err)
		return
	}
	d.Partial = res.Partial
	for _, j := range res.Jobs {
		row := retryRow{Job: j, URL: jobURL(j.ID)}
		if n := len(j.Errors); n > 0 {
			row.Last = j.Errors[n-1]
		}
		d.Rows = append(d.Rows, row)
	}
	d.Total = max(d.Total, int64(len(d.Rows)))
	d.More = d.Total > int64(len(d.Rows))
	h.render(w, r, v, http.StatusOK, "retries", page{Title: "Retries", Nav: "retries", Flash: retriesFlash(q), Data: d})
}

// retriesAction is one of the Retries view's actions.
type retriesAction struct {
	// Done is the message's verb: "made due now".
	Done string
	// do acts on one job.
	do func(h *Handler, r *http.Request, id int64) error
}

var retriesActions = map[string]retriesAction{
	// run: due now (Store.RunNow), its attempts kept.
	"run": {Done: "made due now", do: func(h *Handler, r *http.Request, id int64) error {
		ctx, cancel := storeContext(r)
		defer cancel()
		_, err := h.store.RunNow(ctx, id)
		return err
	}},
	// cancel: give up, while it still waits (Store.CancelPending, in one
	// step: a claim that commits first wins); a job that started running
	// meanwhile is left to its worker.
	"cancel": {Done: "given up (cancelled)", do: func(h *Handler, r *http.Request, id int64) error {
		ctx, cancel := storeContext(r)
		defer cancel()
		_, err := h.store.CancelPending(ctx, id)
		return err
	}},
}

// retriesDo retries now or gives up the jobs of the form: the one its
// button names (only) or the ones selected (id), and goes back to the
// view with how many it acted on and which it could not, and why.
func (h *Handler) retriesDo(w http.ResponseWriter, r *http.Request, v *viewer) {
	name := r.PathValue("action")
	a, ok := retriesActions[name]
	if !ok {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if !v.CanWrite() {
		h.errorPage(w, r, v, http.StatusForbidden, "This login may only look, not change anything.")
		return
	}
	raw := r.PostForm["id"]
	if only := r.PostForm.Get("only"); only != "" {
		raw = []string{only}
	}
	if len(raw) > maxRetriesSelected {
		h.errorPage(w, r, v, http.StatusBadRequest, fmt.Sprintf("At most %d jobs at once.", maxRetriesSelected))
		return
	}
	var ids []int64
	for _, s := range raw {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			h.errorPage(w, r, v, http.StatusBadRequest, "The form names a job that is not a job id.")
			return
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	back := url.Values{}
	if queue := strings.TrimSpace(r.PostForm.Get("queue")); queue != "" {
		back.Set("queue", queue)
	}
	back.Set("done", "retries-"+name)
	acted := 0
	var missed []string
	for _, id := range ids {
		err := a.do(h, r, id)
		if err == nil {
			acted++
			continue
		}
		if !errors.Is(err, readpast.ErrInvalidState) && !errors.Is(err, readpast.ErrNotFound) {
			h.storeError(w, r, v, err)
			return
		}
		missed = append(missed, strconv.FormatInt(id, 10)+":"+h.stateNow(r, id))
	}
	if len(ids) > 0 {
		h.overview.touch()
	}
	back.Set("count", strconv.Itoa(acted))
	if len(missed) > 0 {
		back.Set("missed", strings.Join(missed[:min(len(missed), retriesNamed)], ","))
		if len(missed) > retriesNamed {
			back.Set("more", strconv.Itoa(len(missed)-retriesNamed))
		}
	}
	http.Redirect(w, r, "/retries?"+back.Encode(), http.StatusSeeOther)
}

// stateNow is job id's state for an action's message: "gone" when it is
// no longer there.
func (h *Handler) stateNow(r *http.Request, id int64) string {
	ctx, cancel := storeContext(r)
	defer cancel()
	j, err := h.store.Get(ctx, id)
	if err != nil {
		return "gone"
	}
	return string(j.State)
}

// retriesFlash is the message after an action of the Retries view
// (?done=retries-…&count=n[&missed=id:state,…][&more=m]). Every part is
// checked, so that a made-up address shows no made-up text.
func retriesFlash(q url.Values) string {
	name, found := strings.CutPrefix(q.Get("done"), "retries-")
	a, ok := retriesActions[name]
	n, err := strconv.Atoi(q.Get("count"))
	if !found || !ok || err != nil || n < 0 {
		return ""
	}
	msg := fmt.Sprintf("%d jobs %s.", n, a.Done)
	if n == 1 {
		msg = fmt.Sprintf("1 job %s.", a.Done)
	}
	if n == 0 && q.Get("missed") == "" {
		return "No job was selected."
	}
	var named []string
	for _, m := range strings.Split(q.Get("missed"), ",") {
		id, state, _ := strings.Cut(m, ":")
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 || !(state == "gone" || readpast.JobState(state).Valid()) {
			continue
		}
		how := map[string]string{
			"gone":                          "it is gone",
			string(readpast.StatePending):   "it is pending",
			string(readpast.StateRunning):   "it started running meanwhile",
			string(readpast.StateSucceeded): "it succeeded meanwhile",
			string(readpast.StateFailed):    "it failed for good meanwhile",
			string(readpast.StateCancelled): "it was cancelled meanwhile",
		}[state]
		named = append(named, fmt.Sprintf("job %s (%s)", id, how))
	}
	if len(named) > 0 {
		msg += " Not acted on: " + strings.Join(named, ", ")
		if more, err := strconv.Atoi(q.Get("more")); err == nil && more > 0 {
			msg += fmt.Sprintf(" and %d more", more)
		}
		msg += "."
	}
	return msg
}
