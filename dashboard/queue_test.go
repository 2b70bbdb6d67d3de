package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestQueuePage: a queue's page (and its live part) answers for any queue
// that has jobs, whatever its name holds, and 404 for one that never had
// any; the queue pages keep figures for at most maxQueueSamplers queues.
func TestQueuePage(t *testing.T) {
	e := newEnv(t, true)
	odd := "in/voices?#%"
	e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: odd})
	for path, want := range map[string]int{
		"/queues/" + url.PathEscape(odd):           http.StatusOK,
		"/queues/" + url.PathEscape(odd) + "/live": http.StatusOK,
		"/queues/never":                            http.StatusNotFound,
		"/queues/never/live":                       http.StatusNotFound,
		"/queues/two%20words":                      http.StatusNotFound,
	} {
		r := e.do(req{path: path, token: readToken})
		if r.status != want {
			t.Errorf("%s: %d, want %d", path, r.status, want)
		}
		if want == http.StatusOK && !strings.Contains(r.body, `id="q-pending"`) && !strings.Contains(r.body, "Counting") {
			t.Errorf("%s shows neither counts nor that it counts:\n%s", path, r.body)
		}
	}
	// More queues viewed than pages keep: the least lately viewed goes.
	for i := range maxQueueSamplers + 5 {
		q := fmt.Sprintf("q%03d", i)
		e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: q})
		if r := e.do(req{path: "/queues/" + q, token: readToken}); r.status != http.StatusOK {
			t.Fatalf("/queues/%s: %d", q, r.status)
		}
	}
	qs := e.h.overview.queues
	qs.mu.Lock()
	n := len(qs.m)
	_, first := qs.m["q000"]
	_, last := qs.m[fmt.Sprintf("q%03d", maxQueueSamplers+4)]
	qs.mu.Unlock()
	if n != maxQueueSamplers || first || !last {
		t.Errorf("%d queue samplers (q000 kept: %v, the last kept: %v), want %d, the last viewed", n, first, last, maxQueueSamplers)
	}
}

// TestRetriesActions: retry now and give up act on the job a row's
// button names or on the jobs selected (each once), refuse a form that
// names no job id, or too many, and name the jobs they could not act on.
func TestRetriesActions(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	var ids []int64
	for i := range 3 {
		j := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "hooks", MaxAttempts: 3})
		c, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"hooks"}, Worker: "w", Limit: 1, Lease: time.Minute})
		if err != nil || len(c) != 1 {
			t.Fatal(c, err)
		}
		if errs, err := e.store.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: c[0].Token, Message: fmt.Sprintf("boom %d", i),
			RetryAt: time.Now().Add(time.Hour)}}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		ids = append(ids, j.ID)
	}
	page := e.do(req{path: "/retries?queue=hooks", token: fullToken})
	if page.status != http.StatusOK || !strings.Contains(page.body, "boom 2") {
		t.Fatalf("retries view: %d\n%s", page.status, page.body)
	}
	csrf := csrfOf(t, page.body)
	post := func(action string, form url.Values) resp {
		t.Helper()
		form.Set("csrf", csrf)
		return e.do(req{method: http.MethodPost, path: "/retries/" + action, form: form, token: fullToken})
	}
	id := func(i int) string { return fmt.Sprint(ids[i]) }

	// The row's button: only that job, whatever is selected.
	r := post("run", url.Values{"only": {id(0)}, "id": {id(1)}, "queue": {"hooks"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/retries?count=1&done=retries-run&queue=hooks" {
		t.Fatalf("retry now: %d %s", r.status, r.header.Get("Location"))
	}
	for i, due := range []bool{true, false, false} {
		j, err := e.store.Get(ctx, ids[i])
		if err != nil || j.State != readpast.StatePending || j.RunAt.Before(time.Now()) != due {
			t.Fatalf("job %d: %+v %v, due now: %v", ids[i], j, err, due)
		}
	}
	// A selection, one twice and one gone: acted on once each, the gone
	// one named.
	if _, err := e.store.Cancel(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	r = post("cancel", url.Values{"id": {id(1), id(1), id(2)}})
	loc, _ := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusSeeOther || retriesFlash(loc.Query()) != fmt.Sprintf("1 job given up (cancelled). Not acted on: job %d (it is gone).", ids[2]) {
		t.Fatalf("give up: %d %s: %q", r.status, loc, retriesFlash(loc.Query()))
	}
	if st := e.state(ids[1]); st != readpast.StateCancelled {
		t.Fatalf("job %d after give up: %s", ids[1], st)
	}
	if st := e.state(ids[0]); st != readpast.StatePending {
		t.Fatalf("job %d, not selected: %s", ids[0], st)
	}
	// Bad forms change nothing.
	many := url.Values{}
	for i := range maxRetriesSelected + 1 {
		many.Add("id", fmt.Sprint(i+1))
	}
	for _, tc := range []struct {
		action string
		form   url.Values
		status int
	}{
		{"cancel", url.Values{"id": {"x"}}, http.StatusBadRequest},
		{"cancel", url.Values{"only": {"-3"}}, http.StatusBadRequest},
		{"cancel", many, http.StatusBadRequest},
		{"delete", url.Values{"only": {id(0)}}, http.StatusNotFound},
	} {
		if r := post(tc.action, tc.form); r.status != tc.status {
			t.Errorf("%s %v: %d, want %d", tc.action, tc.form.Get("id")+tc.form.Get("only"), r.status, tc.status)
		}
	}
	if st := e.state(ids[0]); st != readpast.StatePending {
		t.Fatalf("job %d after the bad forms: %s", ids[0], st)
	}
	// A read-only login may not.
	form := url.Values{"only": {id(0)}, "csrf": {csrfOf(t, e.do(req{path: "/retries", token: readToken}).body)}}
	if r := e.do(req{method: http.MethodPost, path: "/retries/cancel", form: form, token: readToken}); r.status != http.StatusForbidden {
		t.Errorf("read-only give up: %d", r.status)
	}
	if st := e.state(ids[0]); st != readpast.StatePending {
		t.Fatalf("job %d after a read-only give up: %s", ids[0], st)
	}
}
