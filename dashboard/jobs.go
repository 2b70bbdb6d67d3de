package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// The job list reads pages of pageSize jobs, examining at most scanFilter
// jobs per page (scanText when searching text, which costs more per job):
// its cost stays bounded however rare the matches are. On PostgreSQL a
// page that examines its whole budget takes about 80 ms (50 with text) on
// a busy 2-core machine (docs/dashboard.md, "Speed").
const (
	pageSize   = 50
	scanFilter = 50_000
	scanText   = 10_000
)

// filter is the job list's selection, from the query string.
type filter struct {
	Queue, State, Kind, Group, Tag, Text string
}

func parseFilter(q url.Values) filter {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return filter{Queue: get("queue"), State: get("state"), Kind: get("kind"), Group: get("group"), Tag: get("tag"), Text: get("q")}
}

// values is the query string of f.
func (f filter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"queue": f.Queue, "state": f.State, "kind": f.Kind, "group": f.Group, "tag": f.Tag, "q": f.Text} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Active reports whether f selects anything.
func (f filter) Active() bool { return f != filter{} }

// URL is the job list for f from the newest job.
func (f filter) URL() template.URL { return jobsURL(f.values()) }

// jobsURL is the address of the job list with query v; it is built from
// escaped parts only.
func jobsURL(v url.Values) template.URL {
	if len(v) == 0 {
		return "/jobs"
	}
	return template.URL("/jobs?" + v.Encode())
}

// jobURL is the address of a job's page.
func jobURL(id int64) template.URL { return template.URL("/jobs/" + strconv.FormatInt(id, 10)) }

// jobsData is what the job list shows.
type jobsData struct {
	Filter filter
	// Problem says what is wrong with the filter, if anything.
	Problem string
	Jobs    []jobRow
	// Cursor is where this page starts (empty from the newest).
	Cursor string
	// Older is the next page's address, empty at the end; Partial says
	// the page stopped at its scan budget (Scan jobs examined).
	Older   template.URL
	Partial bool
	Scan    int64
	// Queues names the known queues, for the queue field's suggestions.
	Queues []string
	Now    time.Time
}

// jobRow is one job of the list.
type jobRow struct {
	*readpast.Job
	URL template.URL
	// LastError is the message of its latest failed attempt.
	LastError string
}

func (h *Handler) jobsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	d := jobsData{Filter: parseFilter(q), Cursor: q.Get("cursor"), Now: h.now()}
	if ov := h.overview.latest(); ov != nil {
		for _, qs := range ov.Queues {
			d.Queues = append(d.Queues, qs.Name)
		}
	}
	p := readpast.SearchParams{
		ListParams: readpast.ListParams{Queue: d.Filter.Queue, State: readpast.JobState(d.Filter.State),
			Kind: d.Filter.Kind, Group: d.Filter.Group, Tag: d.Filter.Tag, Limit: pageSize, Cursor: d.Cursor},
		Text: d.Filter.Text,
		Scan: scanFilter,
	}
	if p.Text != "" {
		p.Scan = scanText
	}
	d.Scan = int64(p.Scan)
	res, err := h.insp.Search(r.Context(), p)
	var fe *readpast.FieldError
	switch {
	case errors.As(err, &fe):
		d.Problem = fmt.Sprintf("The %s is not valid: %s.", fe.Field, fe.Message)
	case err != nil:
		h.storeError(w, r, v, err)
		return
	}
	for _, j := range res.Jobs {
		row := jobRow{Job: j, URL: jobURL(j.ID)}
		if n := len(j.Errors); n > 0 {
			row.LastError = j.Errors[n-1].Message
		}
		d.Jobs = append(d.Jobs, row)
	}
	if res.Next != "" {
		older := d.Filter.values()
		older.Set("cursor", res.Next)
		d.Older = jobsURL(older)
	}
	d.Partial = res.Partial
	h.render(w, r, v, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
}

// jobData is what a job's page shows.
type jobData struct {
	Job     *readpast.Job
	Payload shownText
	Result  shownText
	// Attempts are its failed attempts, newest first.
	Attempts []attemptView
	Actions  []jobAction
	Next     string
	Now      time.Time
	// Parents and Children are the jobs at the other ends of its edges
	// (at most relativesShown of each; MoreParents and MoreChildren say
	// there are more); FlowURL is its flow page's address, when it has
	// edges.
	Parents, Children         []relativeView
	MoreParents, MoreChildren bool
	FlowURL                   template.URL
	// Batch is the batch the job finishes, if any.
	Batch *batchView
}

type attemptView struct {
	readpast.AttemptError
	Trace shownText
}

// jobAction is a button on a job's page.
type jobAction struct {
	Name, Label, Help string
	// Danger styles the button as one that ends something.
	Danger bool
}

// actionsFor lists the actions a job's state allows.
func actionsFor(j *readpast.Job, now time.Time) []jobAction {
	var out []jobAction
	switch j.State {
	case readpast.StateBlocked:
		out = append(out, jobAction{Name: "cancel", Label: "Cancel", Danger: true,
			Help: "It will not run; the jobs that run after it follow their edges' policies."})
	case readpast.StatePending:
		if j.RunAt.After(now) {
			out = append(out, jobAction{Name: "run", Label: "Run now", Help: "Make it due now instead of at its run-at time."})
		}
		out = append(out, jobAction{Name: "cancel", Label: "Cancel", Danger: true, Help: "It will not run."})
	case readpast.StateRunning:
		out = append(out, jobAction{Name: "cancel", Label: "Cancel", Danger: true,
			Help: "Its worker's claim stops being current: the worker cannot complete it."})
	case readpast.StateFailed, readpast.StateCancelled:
		out = append(out, jobAction{Name: "retry", Label: "Retry", Help: "Pending again now, with its attempts reset."})
	}
	if j.State.Final() {
		out = append(out, jobAction{Name: "delete", Label: "Delete", Danger: true, Help: "Gone from the history for good."})
	}
	return out
}

func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such job.")
		return
	}
	j, err := h.store.Get(r.Context(), id)
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := jobData{Job: j, Payload: prettyJSON(j.Payload), Now: h.now(), Next: string(jobURL(id))}
	if len(j.Result) > 0 {
		d.Result = prettyJSON(j.Result)
	}
	for i := len(j.Errors) - 1; i >= 0; i-- {
		e := j.Errors[i]
		d.Attempts = append(d.Attempts, attemptView{AttemptError: e, Trace: cutText(e.Stack, maxShown)})
	}
	d.Actions = actionsFor(j, d.Now)
	if err := h.relatives(r, &d); err != nil {
		h.storeError(w, r, v, err)
		return
	}
	if err := h.batchOf(r, &d); err != nil {
		h.storeError(w, r, v, err)
		return
	}
	h.render(w, r, v, http.StatusOK, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}

// jobAction takes an action on one job: cancel, retry (a failed or
// cancelled job), run (a pending job, now), delete (a finished job) or
// seal (the batch it finishes).
func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	action := r.PathValue("action")
	if err != nil || id < 1 || (action != "cancel" && action != "retry" && action != "run" && action != "delete" && action != "seal") {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if action == "seal" {
		h.sealBatch(w, r, v, id)
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	switch action {
	case "cancel":
		_, err = h.store.Cancel(ctx, id)
	case "delete":
		if err = h.store.Delete(ctx, id); err == nil {
			// The job's page is gone: back to the list.
			h.overview.touch()
			http.Redirect(w, r, "/jobs?done=delete", http.StatusSeeOther)
			return
		}
	case "run":
		// Only a pending job: one that failed or was cancelled since the
		// page was shown is refused, not revived.
		_, err = h.store.RunNow(ctx, id)
	default:
		// Store.Retry also makes a pending job due now: the page offered
		// a retry for a failed or cancelled job, so the job must still be
		// one.
		var j *readpast.Job
		if j, err = h.store.Get(ctx, id); err == nil {
			if j.State == readpast.StatePending {
				err = fmt.Errorf("job %d is %s: %w", id, j.State, readpast.ErrInvalidState)
			} else {
				_, err = h.store.Retry(ctx, id)
			}
		}
	}
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	// The job's page reads the job itself: the overview's figures catch
	// up in the background.
	h.overview.touch()
	h.redirectDone(w, r, string(jobURL(id)), action)
}

// redirectDone sends the browser back to the page the action's form names
// (or fallback), which shows what was done.
func (h *Handler) redirectDone(w http.ResponseWriter, r *http.Request, fallback, action string) {
	h.redirectDoneWith(w, r, fallback, action, nil)
}

// redirectDoneWith is redirectDone with more of what was done in the
// query (extra), for the page's message.
func (h *Handler) redirectDoneWith(w http.ResponseWriter, r *http.Request, fallback, action string, extra url.Values) {
	next := fallback
	if n := r.PostForm.Get("next"); n != "" {
		next = localPath(n)
	}
	u, err := url.Parse(next)
	if err != nil {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	q.Set("done", action)
	for k, vs := range extra {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// flashes are the messages a page shows after an action (?done=).
var flashes = map[string]string{
	"cancel":          "Job cancelled.",
	"delete":          "Job deleted.",
	"retry":           "Job retried: it is pending again.",
	"run":             "Job made due now.",
	"seal":            "Batch sealed: no job joins it; its finishing job is released once every member has ended.",
	"seal-released":   "Batch sealed: every member had ended, so its finishing job is released.",
	"seal-ended":      "Batch sealed: its finishing job had already ended.",
	"pause":           "Queue paused: no worker claims its jobs until it is resumed.",
	"resume":          "Queue resumed.",
	"schedule-pause":  "Schedule paused: it makes no job until it is resumed.",
	"schedule-resume": "Schedule resumed: it makes a job at its next tick.",
}

// storeError answers with the page for an error from the store.
func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	var fe *readpast.FieldError
	switch {
	case errors.Is(err, readpast.ErrNotFound):
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such job.")
	case errors.Is(err, readpast.ErrInvalidState):
		h.errorPage(w, r, v, http.StatusConflict, "The job is not in a state that allows this (it may have moved on since the page was shown).")
	case errors.As(err, &fe):
		h.errorPage(w, r, v, http.StatusBadRequest, fmt.Sprintf("The %s is not valid: %s.", fe.Field, fe.Message))
	case errors.Is(err, readpast.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		h.errorPage(w, r, v, http.StatusServiceUnavailable, "The database is unavailable. Try again in a moment.")
	case r.Context().Err() != nil:
		// The browser went away.
	default:
		h.log.ErrorContext(r.Context(), "dashboard: store error", "path", r.URL.Path, "error", err)
		h.errorPage(w, r, v, http.StatusInternalServerError, "Something went wrong; the server log says what.")
	}
}
