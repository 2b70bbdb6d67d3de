package dashboard

import (
	"context"
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

// bulkCountLimit bounds the count a bulk action's confirmation shows: it
// lists at most this many matching jobs per state (one bounded page each,
// the most a list gives), and says "more than" past it, so that the page
// stays fast on a history of millions.
const bulkCountLimit = 1000

// bulkTimeout bounds a bulk action. It goes on when the browser leaves:
// it works in short batches, and what it did is done.
const bulkTimeout = 10 * time.Minute

// bulkAction is one of the job list's actions on a whole selection.
type bulkAction struct {
	Name   string // readpast.BulkRetryAction, BulkCancelAction or BulkDeleteAction
	Label  string // the link on the job list
	Verb   string // "Retry", "Cancel", "Delete"
	Done   string // the flash's verb: "retried"
	Danger bool
}

// bulkActions are the job list's bulk actions, in the order shown.
func bulkActions() []bulkAction {
	return []bulkAction{
		{Name: readpast.BulkRetryAction, Label: "Retry the failed and cancelled ones", Verb: "Retry", Done: "retried"},
		{Name: readpast.BulkCancelAction, Label: "Cancel the blocked, pending and running ones", Verb: "Cancel", Done: "cancelled", Danger: true},
		{Name: readpast.BulkDeleteAction, Label: "Delete the finished ones", Verb: "Delete", Done: "deleted", Danger: true},
	}
}

func bulkActionNamed(name string) (bulkAction, bool) {
	for _, a := range bulkActions() {
		if a.Name == name {
			return a, true
		}
	}
	return bulkAction{}, false
}

// jobFilter is the bulk filter of the job list's selection. Text in
// payloads and errors cannot select a bulk action's jobs.
func (f filter) jobFilter() readpast.JobFilter {
	return readpast.JobFilter{Queue: f.Queue, Kind: f.Kind, State: readpast.JobState(f.State), Tag: f.Tag, Group: f.Group}
}

// BulkURL is the confirmation page of action a on the selection f.
func (f filter) BulkURL(a bulkAction) template.URL {
	v := f.values()
	v.Del("q")
	return template.URL("/bulk/" + url.PathEscape(a.Name) + "?" + v.Encode())
}

// Bulk lists the bulk actions that apply to the selection: none without
// a filter (no action on every job by accident) or with a text search,
// and only those whose states include the filter's state.
func (f filter) Bulk() []bulkAction {
	if f.Text != "" || f.jobFilter() == (readpast.JobFilter{}) {
		return nil
	}
	var out []bulkAction
	for _, a := range bulkActions() {
		if _, err := f.jobFilter().Normalize(a.Name); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// bulkData is what a bulk action's confirmation page shows.
type bulkData struct {
	Action bulkAction
	Filter filter
	// Count is how many jobs the action would touch now; More says there
	// are more than Count.
	Count int64
	More  bool
}

// bulkPage asks to confirm a bulk action, with the number of jobs it
// would touch.
func (h *Handler) bulkPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	a, f, jf, ok := h.bulkRequest(w, r, v, r.URL.Query())
	if !ok {
		return
	}
	d := bulkData{Action: a, Filter: f}
	states := readpast.BulkStates(a.Name)
	if jf.State != "" {
		states = []readpast.JobState{jf.State}
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	for _, st := range states {
		res, err := h.store.List(ctx, readpast.ListParams{Queue: jf.Queue, Kind: jf.Kind, State: st, Tag: jf.Tag,
			Group: jf.Group, Limit: bulkCountLimit})
		if err != nil {
			h.storeError(w, r, v, err)
			return
		}
		d.Count += int64(len(res.Jobs))
		d.More = d.More || res.Next != ""
	}
	h.render(w, r, v, http.StatusOK, "bulk", page{Title: a.Verb + " jobs", Nav: "jobs", Data: d})
}

// bulkDo runs a confirmed bulk action and goes back to the job list with
// the number of jobs it touched.
func (h *Handler) bulkDo(w http.ResponseWriter, r *http.Request, v *viewer) {
	a, f, jf, ok := h.bulkRequest(w, r, v, r.PostForm)
	if !ok {
		return
	}
	var run func(context.Context, readpast.JobFilter) (int, error)
	switch a.Name {
	case readpast.BulkRetryAction:
		run = h.store.BulkRetry
	case readpast.BulkCancelAction:
		run = h.store.BulkCancel
	default:
		run = h.store.BulkDelete
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	n, err := run(ctx, jf)
	var se *readpast.SkippedError
	skipped := 0
	if errors.As(err, &se) {
		skipped, err = len(se.IDs), nil
	}
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	q := f.values()
	q.Set("done", "bulk-"+a.Name)
	q.Set("count", strconv.Itoa(n))
	if skipped > 0 {
		q.Set("skipped", strconv.Itoa(skipped))
	}
	http.Redirect(w, r, string(jobsURL(q)), http.StatusSeeOther)
}

// bulkRequest reads the action from the path and the selection from
// form, and answers the request itself (returning false) when either is
// not valid.
func (h *Handler) bulkRequest(w http.ResponseWriter, r *http.Request, v *viewer, form url.Values) (bulkAction, filter, readpast.JobFilter, bool) {
	a, ok := bulkActionNamed(r.PathValue("action"))
	if !ok {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return a, filter{}, readpast.JobFilter{}, false
	}
	if !v.CanWrite() {
		h.errorPage(w, r, v, http.StatusForbidden, "This login may only look, not change anything.")
		return a, filter{}, readpast.JobFilter{}, false
	}
	f := parseFilter(form)
	f.Text = ""
	jf, err := f.jobFilter().Normalize(a.Name)
	if err != nil {
		h.storeError(w, r, v, err)
		return a, f, jf, false
	}
	return a, f, jf, true
}

// bulkFlash is the message after a bulk action
// (?done=bulk-…&count=n[&skipped=m]).
func bulkFlash(q url.Values) string {
	name, found := strings.CutPrefix(q.Get("done"), "bulk-")
	a, ok := bulkActionNamed(name)
	n, err := strconv.Atoi(q.Get("count"))
	if !found || !ok || err != nil || n < 0 {
		return ""
	}
	msg := fmt.Sprintf("%d jobs %s.", n, a.Done)
	if n == 1 {
		msg = fmt.Sprintf("1 job %s.", a.Done)
	}
	if m, err := strconv.Atoi(q.Get("skipped")); err == nil && m > 0 {
		msg += fmt.Sprintf(" %d skipped: other transactions held them; run the action again to include them.", m)
	}
	return msg
}
