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

// limitsData is what the limits page shows.
type limitsData struct {
	Limits []limitView
	// Form is the form that sets a limit, for a viewer with full access:
	// empty, filled from a limit to edit, or as typed with its Problem.
	Form limitForm
	Now  time.Time
}

// limitView is a declared limit as the page lists it.
type limitView struct {
	readpast.LimitInfo
	// Text says what the limit bounds: "5 at once · 10 per 1 s, bursts
	// of 20".
	Text string
	// EditURL is the page with the form filled from the limit.
	EditURL template.URL
}

// limitForm is the form that sets (declares or replaces) a limit, with its
// fields as text: as the viewer typed them, or filled from a limit.
type limitForm struct {
	Key, Concurrency, Rate, Per, Burst, Weight string
	// Editing: the form was filled from the declared limit of Key.
	Editing bool
	// Problem says what is wrong with the form, and Field names the field
	// at fault (the form's name for it), if any.
	Problem, Field string
}

// limitFormOf fills the form from a declared limit. Zero fields, which
// mean no bound or no rate, stay empty, as the form takes them.
func limitFormOf(l readpast.Limit) limitForm {
	f := limitForm{Key: l.Key, Editing: true, Weight: strconv.Itoa(max(l.Weight, 1))}
	if l.Concurrency > 0 {
		f.Concurrency = strconv.Itoa(l.Concurrency)
	}
	if l.Rate > 0 {
		f.Rate, f.Per, f.Burst = strconv.Itoa(l.Rate), durationInput(l.Per), strconv.Itoa(l.Burst)
	}
	return f
}

// durationInput writes d as time.ParseDuration reads it, without the zero
// units String leaves at its end: 1h, 1m, 1h30m, 1.5s.
func durationInput(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// limit reads the form into a limit, normalized (readpast.Limit.Normalize,
// as the stores and the API check it: an empty field is 0, which means no
// bound, no rate, a period of one second, a burst of the rate and a
// weight of 1). The error is a *readpast.FieldError naming the form's
// field.
func (f limitForm) limit() (readpast.Limit, error) {
	l := readpast.Limit{Key: f.Key}
	for _, n := range []struct {
		field, text string
		to          *int
	}{
		{"concurrency", f.Concurrency, &l.Concurrency},
		{"rate", f.Rate, &l.Rate},
		{"burst", f.Burst, &l.Burst},
		{"weight", f.Weight, &l.Weight},
	} {
		if n.text == "" {
			continue
		}
		v, err := strconv.Atoi(n.text)
		if err != nil {
			return l, &readpast.FieldError{Field: n.field, Message: "must be a whole number"}
		}
		*n.to = v
	}
	if f.Per != "" {
		per, err := time.ParseDuration(f.Per)
		if err != nil {
			return l, &readpast.FieldError{Field: "per", Message: "must be a duration such as 1s, 1m or 1h"}
		}
		l.Per = per
	}
	return l.Normalize()
}

// parseLimitForm reads the form a viewer posted, as typed (without the
// spaces around each value).
func parseLimitForm(form url.Values) limitForm {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	return limitForm{Key: get("key"), Concurrency: get("concurrency"), Rate: get("rate"), Per: get("per"),
		Burst: get("burst"), Weight: get("weight")}
}

// limitFieldName is how the form's problems name its field.
func limitFieldName(field string) string {
	if field == "per" {
		return "period (per)"
	}
	return field
}

// limitText says what a limit bounds, as the page and its flashes do.
func limitText(l readpast.Limit) string {
	var b strings.Builder
	if l.Concurrency > 0 {
		fmt.Fprintf(&b, "%d at once", l.Concurrency)
	} else {
		b.WriteString("no bound on running jobs")
	}
	if l.Rate > 0 {
		fmt.Fprintf(&b, " · %d per %s, bursts of %d", l.Rate, duration(l.Per), l.Burst)
	}
	if l.Weight > 1 {
		fmt.Fprintf(&b, " · weight %d", l.Weight)
	}
	return b.String()
}

// limitsURL is the limits page with query v.
func limitsURL(v url.Values) template.URL { return template.URL("/limits?" + v.Encode()) }

// limitsPage lists every declared limit (a key's or a template's) with
// the keys it governs: running against the concurrency, the tokens the
// rate allows now and the next start. A viewer with full access gets the
// form that sets a limit, filled from the limit named by ?edit= if any.
func (h *Handler) limitsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	var form limitForm
	if key := q.Get("edit"); key != "" && v.CanWrite() {
		form.Key = key
	}
	h.renderLimits(w, r, v, http.StatusOK, form, limitsFlash(q))
}

// renderLimits writes the limits page with form and flash, a function of
// the declared limits that says what was done. A form that names only a
// declared key is filled from its limit; a form as typed for a declared
// key says it edits that limit, which saving replaces.
func (h *Handler) renderLimits(w http.ResponseWriter, r *http.Request, v *viewer, status int, form limitForm,
	flash func([]readpast.LimitInfo) string) {
	ls, err := h.store.ListLimits(r.Context())
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := limitsData{Form: form, Now: h.now()}
	for _, li := range ls {
		switch {
		case form == (limitForm{Key: li.Key}):
			d.Form = limitFormOf(li.Limit)
		case form.Key == li.Key:
			d.Form.Editing = true
		}
		d.Limits = append(d.Limits, limitView{LimitInfo: li, Text: limitText(li.Limit),
			EditURL: limitsURL(url.Values{"edit": {li.Key}}) + "#limit-form"})
	}
	p := page{Title: "Limits", Nav: "limits", Data: d}
	if flash != nil {
		p.Flash = flash(ls)
	}
	h.render(w, r, v, status, "limits", p)
}

// limitsFlash is the message after a change of a limit
// (?done=limit-…&key=): it names the key and, once set, the limit as the
// store holds it now, and says nothing the declared limits contradict.
func limitsFlash(q url.Values) func([]readpast.LimitInfo) string {
	key, done := q.Get("key"), q.Get("done")
	verb, ok := map[string]string{"limit-created": "created", "limit-replaced": "replaced", "limit-deleted": "deleted"}[done]
	if key == "" || !ok {
		return nil
	}
	return func(ls []readpast.LimitInfo) string {
		l, found := readpast.Limit{}, false
		for _, li := range ls {
			if li.Key == key {
				l, found = li.Limit, true
			}
		}
		switch {
		case done == "limit-deleted" && !found:
			return fmt.Sprintf("Limit %s deleted: its keys fall back to the longest template they match, or to one job at a time.", key)
		case done != "limit-deleted" && found:
			return fmt.Sprintf("Limit %s %s: %s.", key, verb, limitText(l))
		}
		return ""
	}
}

// limitSet declares or replaces the limit the form describes. Bad input
// comes back as the page, with the problem next to the form and the form
// as typed; nothing is stored then.
func (h *Handler) limitSet(w http.ResponseWriter, r *http.Request, v *viewer) {
	form := parseLimitForm(r.PostForm)
	l, err := form.limit()
	var fe *readpast.FieldError
	if err == nil {
		ctx, cancel := storeContext(r)
		defer cancel()
		var created bool
		if created, err = h.store.PutLimit(ctx, l); err == nil {
			done := "limit-replaced"
			if created {
				done = "limit-created"
			}
			http.Redirect(w, r, string(limitsURL(url.Values{"done": {done}, "key": {l.Key}})), http.StatusSeeOther)
			return
		}
	}
	if !errors.As(err, &fe) {
		h.storeError(w, r, v, err)
		return
	}
	form.Field, form.Problem = fe.Field, fmt.Sprintf("The %s is not valid: %s.", limitFieldName(fe.Field), fe.Message)
	h.renderLimits(w, r, v, http.StatusBadRequest, form, nil)
}

// limitDelete deletes the limit declared for the form's key.
func (h *Handler) limitDelete(w http.ResponseWriter, r *http.Request, v *viewer) {
	key := r.PostForm.Get("key")
	ctx, cancel := storeContext(r)
	defer cancel()
	if err := h.store.DeleteLimit(ctx, key); err != nil {
		if errors.Is(err, readpast.ErrLimitNotFound) {
			h.errorPage(w, r, v, http.StatusNotFound, "There is no such limit (it may have been deleted since the page was shown).")
			return
		}
		h.storeError(w, r, v, err)
		return
	}
	http.Redirect(w, r, string(limitsURL(url.Values{"done": {"limit-deleted"}, "key": {key}})), http.StatusSeeOther)
}
