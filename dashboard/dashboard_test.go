package dashboard

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

const (
	fullToken = "full-token-Zm9vYmFyYmF6"
	readToken = "read-token-YmFyYmF6cXV4"
)

// env is a dashboard on a fresh SQLite store, served by httptest.
type env struct {
	t     *testing.T
	store readpast.Store
	h     *Handler
	srv   *httptest.Server
}

func newEnv(t *testing.T, auth bool) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dash.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: st}
	if auth {
		cfg.Tokens, cfg.ReadTokens = []string{fullToken}, []string{readToken}
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, h: h, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		e.srv.Close()
		h.Close()
		st.Close()
	})
	return e
}

// req is one request to the dashboard.
type req struct {
	method, path string
	form         url.Values
	token        string // the login cookie's token, if any
	header       map[string]string
}

type resp struct {
	status int
	header http.Header
	body   string
}

// withFigures is do for a page that shows counts (the overview, a queue
// page): it asks again, for up to 10 s, while the page says its figures
// are still being counted (a page waits at most pageWait for them, and a
// loaded machine can take longer).
func (e *env) withFigures(r req) resp {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p := e.do(r)
		if p.status != http.StatusOK || !strings.Contains(p.body, "Counting…") || time.Now().After(deadline) {
			return p
		}
	}
}

func (e *env) do(r req) resp {
	e.t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	hr, err := http.NewRequest(cmpOr(r.method, http.MethodGet), e.srv.URL+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.token != "" {
		hr.AddCookie(&http.Cookie{Name: cookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(r.token))})
	}
	for k, v := range r.header {
		if k == "Host" {
			hr.Host = v
		}
		hr.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: string(b)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// csrfOf returns the anti-forgery token of a page's forms.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form token in the page:\n%s", page)
	}
	return m[1]
}

func (e *env) enqueue(p readpast.EnqueueParams) *readpast.Job {
	e.t.Helper()
	jobs, err := e.store.Enqueue(context.Background(), []readpast.EnqueueParams{p})
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs[0]
}

func (e *env) state(id int64) readpast.JobState {
	e.t.Helper()
	j, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j.State
}

// TestLogin: pages need a login; a wrong token is refused; a right one is
// kept in a Secure, HttpOnly, SameSite=Strict cookie for the path /; the
// login check sends the browser on, or says why the cookie was not kept;
// logging out clears the cookie.
func TestLogin(t *testing.T) {
	e := newEnv(t, true)
	r := e.do(req{path: "/jobs?queue=a"})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login?next=%2Fjobs%3Fqueue%3Da" {
		t.Fatalf("a page without login: %d to %q", r.status, r.header.Get("Location"))
	}
	login := e.do(req{path: "/login?next=%2Fjobs"})
	if login.status != http.StatusOK || !strings.Contains(login.body, `<label for="token">Access token</label>`) ||
		!strings.Contains(login.body, `name="next" value="/jobs"`) {
		t.Fatalf("login page: %d\n%s", login.status, login.body)
	}
	r = e.do(req{method: "POST", path: "/login", form: url.Values{"token": {"wrong"}, "next": {"/jobs"}}})
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "That token is not valid.") || r.header.Get("Set-Cookie") != "" {
		t.Fatalf("wrong token: %d, cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	r = e.do(req{method: "POST", path: "/login", form: url.Values{"token": {fullToken}, "next": {"https://evil.example/"}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login/check?next=%2F" {
		t.Fatalf("login: %d to %q (a next elsewhere must become /)", r.status, r.header.Get("Location"))
	}
	cookie := r.header.Get("Set-Cookie")
	want := cookieName + "=" + base64.RawURLEncoding.EncodeToString([]byte(fullToken)) +
		"; Path=/; Max-Age=43200; HttpOnly; Secure; SameSite=Strict"
	if cookie != want {
		t.Fatalf("login cookie\n%s\nwant\n%s", cookie, want)
	}
	if r := e.do(req{path: "/login/check?next=%2Fjobs", token: fullToken}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/jobs" {
		t.Fatalf("login check with the cookie: %d to %q", r.status, r.header.Get("Location"))
	}
	if r := e.do(req{path: "/login/check?next=%2Fjobs"}); r.status != http.StatusOK || !strings.Contains(r.body, "did not keep the login cookie") {
		t.Fatalf("login check without the cookie: %d\n%s", r.status, r.body)
	}
	page := e.do(req{path: "/", token: fullToken})
	if page.status != http.StatusOK || !strings.Contains(page.body, "<h1>Overview</h1>") || strings.Contains(page.body, "read-only") {
		t.Fatalf("overview with the cookie: %d\n%s", page.status, page.body)
	}
	// A token no longer configured (or a bad cookie) is a login again.
	r = e.do(req{path: "/", token: "revoked"})
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "ended=1") {
		t.Fatalf("a revoked token: %d to %q", r.status, r.header.Get("Location"))
	}
	r = e.do(req{method: "POST", path: "/logout", token: fullToken, form: url.Values{csrfField: {csrfOf(t, page.body)}}})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Set-Cookie"), cookieName+"=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict") {
		t.Fatalf("logout: %d, cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	// The live refresh's fetch gets a 401 instead of the login page.
	if r := e.do(req{path: "/overview/live"}); r.status != http.StatusUnauthorized {
		t.Fatalf("live part without login: %d", r.status)
	}
	// A navigation from another site comes back through a reload, which
	// the SameSite=Strict cookie accompanies.
	r = e.do(req{path: "/jobs", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}})
	if r.status != http.StatusOK || !strings.Contains(r.body, `<meta http-equiv="refresh" content="0">`) {
		t.Fatalf("cross-site navigation: %d\n%s", r.status, r.body)
	}
}

// TestReadOnly: a read-only token sees every page without any action, and
// the server refuses its actions even with a valid form token.
func TestReadOnly(t *testing.T) {
	e := newEnv(t, true)
	failed := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q"})
	if _, err := e.store.Cancel(context.Background(), failed.ID); err != nil {
		t.Fatal(err)
	}
	pending := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q"})

	over := e.do(req{path: "/", token: readToken})
	if over.status != http.StatusOK || !strings.Contains(over.body, "read-only") || strings.Contains(over.body, "/pause") {
		t.Fatalf("overview, read-only: %d\n%s", over.status, over.body)
	}
	for _, id := range []int64{failed.ID, pending.ID} {
		p := e.do(req{path: "/jobs/" + strconv.FormatInt(id, 10), token: readToken})
		if p.status != http.StatusOK || strings.Contains(p.body, `id="action-`) {
			t.Fatalf("job page, read-only: %d\n%s", p.status, p.body)
		}
		if full := e.do(req{path: "/jobs/" + strconv.FormatInt(id, 10), token: fullToken}); !strings.Contains(full.body, `id="action-`) {
			t.Fatalf("job page, full access, has no action:\n%s", full.body)
		}
	}
	csrf := csrfOf(t, over.body) // the logout form's
	for _, path := range []string{
		"/jobs/" + strconv.FormatInt(pending.ID, 10) + "/cancel",
		"/jobs/" + strconv.FormatInt(failed.ID, 10) + "/retry",
		"/queues/q/pause",
	} {
		r := e.do(req{method: "POST", path: path, token: readToken, form: url.Values{csrfField: {csrf}}})
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "may only look") {
			t.Errorf("POST %s, read-only: %d\n%s", path, r.status, r.body)
		}
	}
	if e.state(pending.ID) != readpast.StatePending || e.state(failed.ID) != readpast.StateCancelled {
		t.Fatal("a read-only token changed a job")
	}
	qs, err := e.store.Queues(context.Background())
	if err != nil || len(qs) != 1 || qs[0].Paused {
		t.Fatalf("a read-only token paused a queue: %+v, %v", qs, err)
	}
}

// TestReadOnlyLogOut: a read-only login, which is shown "Log out", can
// log out; its logout needs the form's anti-forgery token like any other
// POST, and a post made by another site is refused.
func TestReadOnlyLogOut(t *testing.T) {
	e := newEnv(t, true)
	over := e.do(req{path: "/", token: readToken})
	if over.status != http.StatusOK || !strings.Contains(over.body, `action="/logout"`) {
		t.Fatalf("overview, read-only: %d, no logout form\n%s", over.status, over.body)
	}
	csrf := csrfOf(t, over.body)
	for name, r := range map[string]req{
		"no form token":    {method: "POST", path: "/logout", token: readToken, form: url.Values{}},
		"wrong form token": {method: "POST", path: "/logout", token: readToken, form: url.Values{csrfField: {csrfToken([]byte(fullToken))}}},
		"cross-site": {method: "POST", path: "/logout", token: readToken, form: url.Values{csrfField: {csrf}},
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		if got := e.do(r); got.status != http.StatusForbidden || got.header.Get("Set-Cookie") != "" {
			t.Errorf("read-only logout, %s: %d, Set-Cookie %q", name, got.status, got.header.Get("Set-Cookie"))
		}
	}
	r := e.do(req{method: "POST", path: "/logout", token: readToken, form: url.Values{csrfField: {csrf}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" ||
		!strings.HasPrefix(r.header.Get("Set-Cookie"), cookieName+"=; Path=/; Max-Age=0; HttpOnly; Secure; SameSite=Strict") {
		t.Fatalf("read-only logout: %d to %q, Set-Cookie %q\n%s", r.status, r.header.Get("Location"), r.header.Get("Set-Cookie"), r.body)
	}
}

// TestSchedules: the schedules page lists the schedules, with their
// actions for full access only; an unknown schedule or action is a 404
// and a read-only token's pause is refused.
func TestSchedules(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	if _, _, err := e.store.PutSchedule(ctx, readpast.ScheduleParams{Name: "nightly/eu", Cron: "@daily", Job: readpast.EnqueueParams{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	full := e.do(req{path: "/schedules", token: fullToken})
	action := `action="/schedules/nightly%2Feu/pause"`
	if full.status != http.StatusOK || !strings.Contains(full.body, action) {
		t.Fatalf("schedules, full access: %d\n%s", full.status, full.body)
	}
	ro := e.do(req{path: "/schedules", token: readToken})
	if ro.status != http.StatusOK || !strings.Contains(ro.body, "nightly/eu") || strings.Contains(ro.body, "/pause") {
		t.Fatalf("schedules, read-only: %d\n%s", ro.status, ro.body)
	}
	csrf := csrfOf(t, full.body)
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/schedules/nosuch/pause", fullToken, http.StatusNotFound},
		{"/schedules/nightly%2Feu/delete", fullToken, http.StatusNotFound},
		{"/schedules/nightly%2Feu/pause", readToken, http.StatusForbidden},
	} {
		if r := e.do(req{method: "POST", path: c.path, token: c.token, form: url.Values{csrfField: {csrf}}}); r.status != c.status {
			t.Errorf("POST %s: %d, want %d", c.path, r.status, c.status)
		}
	}
	if sc, err := e.store.GetSchedule(ctx, "nightly/eu"); err != nil || sc.Paused {
		t.Fatalf("the schedule was paused: %+v %v", sc, err)
	}
	r := e.do(req{method: "POST", path: "/schedules/nightly%2Feu/pause", token: fullToken, form: url.Values{csrfField: {csrf}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/schedules?done=schedule-pause" {
		t.Fatalf("pause: %d to %q", r.status, r.header.Get("Location"))
	}
	if sc, err := e.store.GetSchedule(ctx, "nightly/eu"); err != nil || !sc.Paused {
		t.Fatalf("the schedule is not paused: %+v %v", sc, err)
	}
	if p := e.do(req{path: "/schedules?done=schedule-pause", token: fullToken}); !strings.Contains(p.body, "Schedule paused") ||
		!strings.Contains(p.body, `action="/schedules/nightly%2Feu/resume"`) {
		t.Fatalf("after the pause:\n%s", p.body)
	}
}

// TestForgery: an action needs the form's token, and a browser request
// from another origin is refused before that.
func TestForgery(t *testing.T) {
	e := newEnv(t, true)
	j := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q"})
	path := "/jobs/" + strconv.FormatInt(j.ID, 10)
	csrf := csrfOf(t, e.do(req{path: path, token: fullToken}).body)
	cancel := path + "/cancel"
	for name, r := range map[string]req{
		"cross-site":   {header: map[string]string{"Sec-Fetch-Site": "cross-site"}, form: url.Values{csrfField: {csrf}}},
		"same-site":    {header: map[string]string{"Sec-Fetch-Site": "same-site"}, form: url.Values{csrfField: {csrf}}},
		"other origin": {header: map[string]string{"Origin": "http://evil.example"}, form: url.Values{csrfField: {csrf}}},
		"no token":     {form: url.Values{}},
		"wrong token":  {form: url.Values{csrfField: {csrfToken([]byte("another"))}}},
		"read token":   {form: url.Values{csrfField: {csrfToken([]byte(readToken))}}},
	} {
		r.method, r.path, r.token = "POST", cancel, fullToken
		if res := e.do(r); res.status != http.StatusForbidden {
			t.Errorf("%s: %d", name, res.status)
		}
	}
	if e.state(j.ID) != readpast.StatePending {
		t.Fatal("a forged request cancelled the job")
	}
	r := e.do(req{method: "POST", path: cancel, token: fullToken, form: url.Values{csrfField: {csrf}, "next": {path}},
		header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.srv.URL}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != path+"?done=cancel" {
		t.Fatalf("cancel: %d to %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	if e.state(j.ID) != readpast.StateCancelled {
		t.Fatal("the job was not cancelled")
	}
	if p := e.do(req{path: path + "?done=cancel", token: fullToken}); !strings.Contains(p.body, "Job cancelled.") {
		t.Fatalf("the job page does not say it was cancelled:\n%s", p.body)
	}
	// Cancelling again is a conflict, shown as such.
	if r := e.do(req{method: "POST", path: cancel, token: fullToken, form: url.Values{csrfField: {csrf}}}); r.status != http.StatusConflict {
		t.Fatalf("cancel a cancelled job: %d", r.status)
	}
}

// TestAuthOff: with no tokens there is no login, only loopback hosts (and
// allowed ones) are answered, and actions still need the form token, made
// from a key of the handler's own.
func TestAuthOff(t *testing.T) {
	e := newEnv(t, false)
	j := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q"})
	if r := e.do(req{path: "/", header: map[string]string{"Host": "rebound.example"}}); r.status != http.StatusForbidden {
		t.Fatalf("a foreign Host with auth off: %d", r.status)
	}
	page := e.withFigures(req{path: "/"})
	if page.status != http.StatusOK || strings.Contains(page.body, "Log out") || !strings.Contains(page.body, "/queues/q/pause") {
		t.Fatalf("overview with auth off: %d\n%s", page.status, page.body)
	}
	if r := e.do(req{path: "/login"}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("login page with auth off: %d to %q", r.status, r.header.Get("Location"))
	}
	if r := e.do(req{method: "POST", path: "/queues/q/pause", form: url.Values{}}); r.status != http.StatusForbidden {
		t.Fatalf("pause without the form token: %d", r.status)
	}
	r := e.do(req{method: "POST", path: "/queues/q/pause", form: url.Values{csrfField: {csrfOf(t, page.body)}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/?done=pause" {
		t.Fatalf("pause: %d to %q", r.status, r.header.Get("Location"))
	}
	over := e.do(req{path: "/?done=pause"})
	if !strings.Contains(over.body, "Queue paused") || !strings.Contains(over.body, `<span class="badge paused"`) ||
		!strings.Contains(over.body, "/queues/q/resume") {
		t.Fatalf("the overview does not show the pause at once:\n%s", over.body)
	}
	if e.state(j.ID) != readpast.StatePending {
		t.Fatal("pausing changed a job")
	}
}

// TestNothingFromElsewhere: every page and file names only this server's
// addresses, and the Content-Security-Policy forbids loading anything from
// elsewhere; static files are served with their type, and for good when
// asked with their version.
func TestNothingFromElsewhere(t *testing.T) {
	e := newEnv(t, false)
	j := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q", Payload: []byte(`{"see":"https://example.com/x"}`)})
	external := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*"(https?:)?//`)
	for _, path := range []string{"/", "/overview/live", "/jobs", "/jobs/" + strconv.FormatInt(j.ID, 10), "/nope"} {
		r := e.do(req{path: path})
		if m := external.FindString(r.body); m != "" {
			t.Errorf("%s links elsewhere: %s", path, m)
		}
		if csp := r.header.Get("Content-Security-Policy"); csp != contentSecurityPolicy {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, r.header)
		}
	}
	for name, ct := range map[string]string{"style.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8", "favicon.svg": "image/svg+xml"} {
		u, err := e.h.static.url(name)
		if err != nil {
			t.Fatal(err)
		}
		r := e.do(req{path: u})
		if r.status != http.StatusOK || r.header.Get("Content-Type") != ct || r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s: %d %q %q", u, r.status, r.header.Get("Content-Type"), r.header.Get("Cache-Control"))
		}
		// Only the SVG namespace, which is never fetched, looks like an address.
		if strings.Contains(strings.ReplaceAll(r.body, `xmlns="http://www.w3.org/2000/svg"`, ""), "http") {
			t.Errorf("%s names an address", name)
		}
		if r := e.do(req{path: "/static/" + name}); r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s without its version: %q", name, r.header.Get("Cache-Control"))
		}
	}
	if r := e.do(req{path: "/nope"}); r.status != http.StatusNotFound {
		t.Errorf("unknown page: %d", r.status)
	}
}

// TestJobList: the list filters, pages with a cursor, searches text and
// says when a page stopped at its scan budget.
func TestJobList(t *testing.T) {
	e := newEnv(t, false)
	var ids []int64
	for i := range 120 {
		p := readpast.EnqueueParams{Kind: "k", Queue: []string{"a", "b"}[i%2], Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)}
		if i == 7 {
			p.Payload = []byte(`{"n":7,"note":"a Needle here"}`)
		}
		ids = append(ids, e.enqueue(p).ID)
	}
	rowID := regexp.MustCompile(`<tr id="job-(\d+)">`)
	rows := func(body string) []string {
		var out []string
		for _, m := range rowID.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	first := e.do(req{path: "/jobs"})
	got := rows(first.body)
	if len(got) != pageSize || got[0] != strconv.FormatInt(ids[119], 10) {
		t.Fatalf("first page: %v", got)
	}
	older := regexp.MustCompile(`href="(/jobs\?[^"]*cursor=[^"]+)"`).FindStringSubmatch(first.body)
	if older == nil {
		t.Fatalf("no link to older jobs:\n%s", first.body)
	}
	second := rows(e.do(req{path: strings.ReplaceAll(older[1], "&amp;", "&")}).body)
	if len(second) != pageSize || second[0] != strconv.FormatInt(ids[69], 10) {
		t.Fatalf("second page starts at %v", second[:1])
	}
	if got := rows(e.do(req{path: "/jobs?queue=a&state=pending"}).body); len(got) != pageSize || got[0] != strconv.FormatInt(ids[118], 10) {
		t.Fatalf("queue a: %v", got)
	}
	if got := rows(e.do(req{path: "/jobs?q=needle"}).body); len(got) != 1 || got[0] != strconv.FormatInt(ids[7], 10) {
		t.Fatalf("text search: %v", got)
	}
	if r := e.do(req{path: "/jobs?state=bogus"}); r.status != http.StatusOK || !strings.Contains(r.body, "The state is not valid") {
		t.Fatalf("a bad state: %d\n%s", r.status, r.body)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "/",
		"/jobs?queue=a":        "/jobs?queue=a",
		"//evil.example/x":     "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"jobs":                 "/",
		"/a\r\nSet-Cookie: x":  "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := count(in); got != want {
			t.Errorf("count(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{
		0: "0", 850 * time.Microsecond: "850 µs", 12340 * time.Microsecond: "12.3 ms", 1500 * time.Millisecond: "1.5 s",
		200 * time.Second: "3 min 20 s", 2*time.Hour + 5*time.Minute: "2 h 5 min", 72 * time.Hour: "3 days",
	} {
		if got := duration(in); got != want {
			t.Errorf("duration(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]float64{0.3: 0.5, 1: 1, 3: 5, 7: 10, 12: 20, 2.2: 2.5, 0: 1} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
	if s := cutText("aé", 2); s.Text != "a" || s.Cut != 2 {
		t.Errorf("cutText cut a rune: %+v", s)
	}
}

// TestCharts: a minute's bars stack completed under failed, and the
// latency lines break where no job started.
func TestCharts(t *testing.T) {
	since := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	minutes := []readpast.ActivityMinute{
		{Minute: since, Succeeded: 6, Failed: 2, Started: 8, LatencyP50: 10 * time.Millisecond, LatencyP99: 40 * time.Millisecond},
		{Minute: since.Add(time.Minute), Succeeded: 4, Started: 4, LatencyP50: 20 * time.Millisecond, LatencyP99: 30 * time.Millisecond},
		{Minute: since.Add(3 * time.Minute), Failed: 1, Started: 1, LatencyP50: time.Second, LatencyP99: time.Second},
		{Minute: since.Add(-time.Minute), Succeeded: 99}, // before the window
	}
	th := throughputChart(since, minutes)
	if len(th.Bars) != 4 || th.Bars[0].Class != "succeeded" || th.Bars[1].Class != "failed" || th.Bars[1].Y >= th.Bars[0].Y {
		t.Fatalf("throughput bars: %+v", th.Bars)
	}
	if th.YTicks[len(th.YTicks)-1].Label != "8" || !strings.Contains(th.Label, "10 completed, 3 failed") {
		t.Fatalf("throughput axis %+v, label %q", th.YTicks, th.Label)
	}
	lat := latencyChart(since, minutes)
	if len(lat.Lines) != 2 || len(lat.Dots) != 6 || lat.Lines[0].Class != "p50" || strings.Count(lat.Lines[0].Points, ",") != 2 {
		t.Fatalf("latency lines %+v, dots %d", lat.Lines, len(lat.Dots))
	}
	if empty := throughputChart(since, nil); empty.Empty == "" || len(empty.Bars) != 0 {
		t.Fatalf("empty chart: %+v", empty)
	}
}
