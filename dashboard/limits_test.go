package dashboard

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestLimits: the limits page lists each declared limit with the keys it
// governs, their running jobs, tokens and next start, and its weight
// when it is not 1, for read-only viewers too, without the form or any
// action; with none it says how to declare one.
func TestLimits(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	if r := e.do(req{path: "/limits", token: readToken}); r.status != http.StatusOK || !strings.Contains(r.body, `id="no-limits"`) {
		t.Fatalf("limits, none declared: %d\n%s", r.status, r.body)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "customer:*", Concurrency: 2, Rate: 6, Per: time.Hour, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "api", Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "heavy", Weight: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "tenant:*", Concurrency: 1, Rate: 2, Weight: 5}); err != nil {
		t.Fatal(err)
	}
	if g, err := e.store.TakeTokens(ctx, "customer:42", 3); err != nil || !g.Granted {
		t.Fatalf("TakeTokens: %+v %v", g, err)
	}
	r := e.do(req{path: "/limits?edit=api", token: readToken})
	if r.status != http.StatusOK {
		t.Fatalf("limits: %d\n%s", r.status, r.body)
	}
	for _, want := range []string{
		`<a href="/limits" aria-current="page">Limits</a>`,
		`id="limit-api"`, ">4 at once</p>",
		`id="limit-customer:*"`, ">2 at once · 6 per 1 h, bursts of 3</p>",
		`id="limit-heavy"`, ">no bound on running jobs · weight 3</p>",
		`id="limit-tenant:*"`, ">1 at once · 2 per 1 s, bursts of 2 · weight 5</p>",
		`id="key-customer:42"`, `<td class="running">0 of 2</td>`, `<td class="tokens">0</td>`, "(in ",
		`href="/jobs?group=customer%3A42"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the limits page lacks %q", want)
		}
	}
	if strings.Contains(r.body, "weight 1") {
		t.Error("the limits page shows a weight of 1, the default")
	}
	for _, unwanted := range []string{`id="limit-form"`, `action="/limits`, "Edit limit", "Delete limit"} {
		if strings.Contains(r.body, unwanted) {
			t.Errorf("the read-only limits page has %q", unwanted)
		}
	}
	if t.Failed() {
		t.Log(r.body)
	}
}

// limitsPage is the limits page as a viewer with full access sees it,
// with its form token.
func (e *env) limitsPage(query string) (resp, string) {
	e.t.Helper()
	r := e.do(req{path: "/limits" + query, token: fullToken})
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /limits%s: %d\n%s", query, r.status, r.body)
	}
	return r, csrfOf(e.t, r.body)
}

// limitOf returns the limit the store holds for key, or nil.
func (e *env) limitOf(key string) *readpast.Limit {
	e.t.Helper()
	li, err := e.store.GetLimit(context.Background(), key)
	if errors.Is(err, readpast.ErrLimitNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return &li.Limit
}

// limitFormValues is a posted limit form: the form token, then key,
// concurrency, rate, per, burst and weight.
func limitFormValues(csrf string, fields ...string) url.Values {
	v := url.Values{csrfField: {csrf}}
	for i, name := range []string{"key", "concurrency", "rate", "per", "burst", "weight"} {
		if i < len(fields) {
			v.Set(name, fields[i])
		}
	}
	return v
}

// inputValue returns the value attribute of the form's input name.
func inputValue(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<input id="l-` + name + `" name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page has no input %s:\n%s", name, page)
	}
	return html.UnescapeString(m[1])
}

// TestLimitSetEditDelete: a viewer with full access declares a limit with
// the form (empty fields taking their defaults), sees it listed with a
// flash naming it as stored, edits it from its Edit link (the form comes
// filled with its values) and deletes it with its Delete button.
func TestLimitSetEditDelete(t *testing.T) {
	e := newEnv(t, true)
	page, csrf := e.limitsPage("")
	for _, want := range []string{`<form class="filters limit-form" id="limit-form" method="post" action="/limits"`, "Set a limit", `id="no-limits"`, "with the form above"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the empty limits page lacks %q", want)
		}
	}

	r := e.do(req{method: "POST", path: "/limits", token: fullToken, form: limitFormValues(csrf, " customer:* ", "5", "10", "1m", "", "")})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/limits?done=limit-created&key=customer%3A%2A" {
		t.Fatalf("set: %d to %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	want := readpast.Limit{Key: "customer:*", Concurrency: 5, Rate: 10, Per: time.Minute, Burst: 10, Weight: 1}
	if got := e.limitOf("customer:*"); got == nil || *got != want {
		t.Fatalf("stored after the set: %+v, want %+v", got, want)
	}
	page, _ = e.limitsPage("?done=limit-created&key=customer%3A%2A")
	for _, want := range []string{
		`<p class="flash" role="status">Limit customer:* created: 5 at once · 10 per 1 min, bursts of 10.</p>`,
		`id="limit-customer:*"`, ">5 at once · 10 per 1 min, bursts of 10</p>",
		`<a href="/limits?edit=customer%3A%2A#limit-form" class="edit" aria-label="Edit limit customer:*">Edit</a>`,
		`<input type="hidden" name="key" value="customer:*">`,
		`<button type="submit" class="danger" aria-label="Delete limit customer:*">Delete</button>`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("after the set, the limits page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatal(page.body)
	}

	// Edit: the form comes filled with the limit as stored.
	page, csrf = e.limitsPage("?edit=customer%3A%2A")
	if !strings.Contains(page.body, "Edit the limit customer:*") || !strings.Contains(page.body, `id="limit-cancel"`) {
		t.Errorf("the edit form does not say what it edits:\n%s", page.body)
	}
	for name, want := range map[string]string{"key": "customer:*", "concurrency": "5", "rate": "10", "per": "1m", "burst": "10", "weight": "1"} {
		if got := inputValue(t, page.body, name); got != want {
			t.Errorf("the edit form's %s is %q, want %q", name, got, want)
		}
	}
	form := limitFormValues(csrf, "customer:*", "", "3", "1h", "2", "4")
	r = e.do(req{method: "POST", path: "/limits", token: fullToken, form: form})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/limits?done=limit-replaced&key=customer%3A%2A" {
		t.Fatalf("edit: %d to %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	want = readpast.Limit{Key: "customer:*", Rate: 3, Per: time.Hour, Burst: 2, Weight: 4}
	if got := e.limitOf("customer:*"); got == nil || *got != want {
		t.Fatalf("stored after the edit: %+v, want %+v", got, want)
	}
	page, _ = e.limitsPage("?done=limit-replaced&key=customer%3A%2A")
	if flash := "Limit customer:* replaced: no bound on running jobs · 3 per 1 h, bursts of 2 · weight 4."; !strings.Contains(page.body, flash) {
		t.Errorf("after the edit, no flash %q:\n%s", flash, page.body)
	}
	// A flash the store contradicts is not shown.
	if page, _ = e.limitsPage("?done=limit-deleted&key=customer%3A%2A"); strings.Contains(page.body, `class="flash"`) {
		t.Errorf("a limit still declared is said deleted:\n%s", page.body)
	}

	r = e.do(req{method: "POST", path: "/limits/delete", token: fullToken, form: url.Values{csrfField: {csrf}, "key": {"customer:*"}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/limits?done=limit-deleted&key=customer%3A%2A" {
		t.Fatalf("delete: %d to %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	if got := e.limitOf("customer:*"); got != nil {
		t.Fatalf("after the delete the store holds %+v", got)
	}
	page, _ = e.limitsPage("?done=limit-deleted&key=customer%3A%2A")
	if !strings.Contains(page.body, "Limit customer:* deleted:") || !strings.Contains(page.body, `id="no-limits"`) {
		t.Errorf("after the delete:\n%s", page.body)
	}
	// Deleting it again: there is no such limit.
	r = e.do(req{method: "POST", path: "/limits/delete", token: fullToken, form: url.Values{csrfField: {csrf}, "key": {"customer:*"}}})
	if r.status != http.StatusNotFound || !strings.Contains(r.body, "There is no such limit") {
		t.Errorf("deleting a deleted limit: %d\n%s", r.status, r.body)
	}
}

// TestLimitBadInput: a form the limit's rules refuse comes back as the
// page, 400, with the problem next to the form naming the field, the
// field marked invalid, and every value as typed; nothing is stored, and
// a limit being edited keeps its values.
func TestLimitBadInput(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	kept := readpast.Limit{Key: "api", Concurrency: 4, Weight: 1}
	if _, err := e.store.PutLimit(ctx, kept); err != nil {
		t.Fatal(err)
	}
	_, csrf := e.limitsPage("")
	for _, c := range []struct {
		fields  []string
		field   string
		problem string
	}{
		{[]string{"", "5"}, "key", "The key is not valid: is required."},
		{[]string{"customer 42", "5"}, "key", "The key is not valid: must be printable characters without spaces."},
		{[]string{"a*b", "5"}, "key", `The key is not valid: may hold &#34;*&#34; only at its end (a template).`},
		{[]string{"new", "five"}, "concurrency", "The concurrency is not valid: must be a whole number."},
		{[]string{"new", "-1"}, "concurrency", "The concurrency is not valid: must be between 0 (no bound) and 10000."},
		{[]string{"new", "2", "", "1s"}, "rate", "The rate is not valid: is required with per or burst."},
		{[]string{"new", "2", "1.5"}, "rate", "The rate is not valid: must be a whole number."},
		{[]string{"new", "2", "10", "soon"}, "per", "The period (per) is not valid: must be a duration such as 1s, 1m or 1h."},
		{[]string{"new", "2", "10", "25h"}, "per", "The period (per) is not valid: must be between 1µs and 24h0m0s."},
		{[]string{"new", "2", "10", "-1s"}, "per", "The period (per) is not valid: must be between 1µs and 24h0m0s."},
		{[]string{"new", "2", "10", "500ns"}, "rate", "The rate is not valid: allows more than one start a microsecond"},
		{[]string{"new", "2", "10", "1s", "0x10"}, "burst", "The burst is not valid: must be a whole number."},
		{[]string{"new", "2", "10", "1s", "2000000"}, "burst", "The burst is not valid: must be between 1 and 1000000."},
		{[]string{"new", "2", "", "", "", "101"}, "weight", "The weight is not valid: must be between 1 and 100 (0: 1)."},
		{[]string{"api", "x<y>"}, "concurrency", "The concurrency is not valid: must be a whole number."},
	} {
		form := limitFormValues(csrf, c.fields...)
		r := e.do(req{method: "POST", path: "/limits", token: fullToken, form: form})
		if r.status != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400\n%s", c.fields, r.status, r.body)
			continue
		}
		if !strings.Contains(r.body, `<p class="error full" role="alert" id="limit-problem">`+c.problem) {
			t.Errorf("%q: the page does not say %q:\n%s", c.fields, c.problem, r.body)
		}
		if !strings.Contains(r.body, `name="`+c.field+`" value="`) ||
			!regexp.MustCompile(`name="`+c.field+`" value="[^"]*"[^>]* aria-invalid="true" aria-describedby="limit-problem">`).MatchString(r.body) {
			t.Errorf("%q: the field %s is not marked invalid", c.fields, c.field)
		}
		if n := strings.Count(r.body, `aria-invalid="true"`); n != 1 {
			t.Errorf("%q: %d fields marked invalid", c.fields, n)
		}
		for _, name := range []string{"key", "concurrency", "rate", "per", "burst", "weight"} {
			if got, want := inputValue(t, r.body, name), strings.TrimSpace(form.Get(name)); got != want {
				t.Errorf("%q: the form came back with %s %q, want %q as typed", c.fields, name, got, want)
			}
		}
		if !strings.Contains(r.body, `id="limit-api"`) {
			t.Errorf("%q: the page with the problem does not list the limits", c.fields)
		}
		if editing := strings.Contains(r.body, "Edit the limit api"); editing != (form.Get("key") == "api") {
			t.Errorf("%q: the form says it edits the limit api: %v", c.fields, editing)
		}
		ls, err := e.store.ListLimits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != 1 || ls[0].Limit != kept {
			t.Fatalf("%q: the store holds %+v, want only %+v", c.fields, ls, kept)
		}
	}
}

// TestLimitWriteRefused: a read-only login sees no form and its posts are
// refused, even with its own valid form token; a post without the form
// token, or with another's, is refused too. Nothing changes.
func TestLimitWriteRefused(t *testing.T) {
	e := newEnv(t, true)
	kept := readpast.Limit{Key: "api", Concurrency: 4, Weight: 1}
	if _, err := e.store.PutLimit(context.Background(), kept); err != nil {
		t.Fatal(err)
	}
	ro := e.do(req{path: "/limits?edit=api", token: readToken})
	if ro.status != http.StatusOK || strings.Contains(ro.body, `id="limit-form"`) || strings.Contains(ro.body, "/limits/delete") {
		t.Fatalf("read-only limits page: %d\n%s", ro.status, ro.body)
	}
	roCSRF := csrfOf(t, ro.body) // the logout form's
	_, csrf := e.limitsPage("")
	set := func(token string) url.Values { return limitFormValues(token, "api", "9") }
	del := func(token string) url.Values { return url.Values{csrfField: {token}, "key": {"api"}} }
	for _, c := range []struct {
		name, path, token string
		form              url.Values
		status            int
		says              string
	}{
		{"read-only set", "/limits", readToken, set(roCSRF), http.StatusForbidden, "may only look"},
		{"read-only new", "/limits", readToken, limitFormValues(roCSRF, "other", "1"), http.StatusForbidden, "may only look"},
		{"read-only delete", "/limits/delete", readToken, del(roCSRF), http.StatusForbidden, "may only look"},
		{"set without form token", "/limits", fullToken, limitFormValues("", "api", "9"), http.StatusForbidden, "anti-forgery token"},
		{"delete without form token", "/limits/delete", fullToken, url.Values{"key": {"api"}}, http.StatusForbidden, "anti-forgery token"},
		{"set with the read token's form token", "/limits", fullToken, set(roCSRF), http.StatusForbidden, "anti-forgery token"},
		{"delete with a made-up form token", "/limits/delete", fullToken, del("guessed"), http.StatusForbidden, "anti-forgery token"},
		{"set without login", "/limits", "", set(csrf), http.StatusUnauthorized, "Log in again"},
		{"set from another site", "/limits", fullToken, set(csrf), http.StatusForbidden, "came from another site"},
	} {
		r := req{method: "POST", path: c.path, token: c.token, form: c.form}
		if c.name == "set from another site" {
			r.header = map[string]string{"Sec-Fetch-Site": "cross-site"}
		}
		if got := e.do(r); got.status != c.status || !strings.Contains(got.body, c.says) {
			t.Errorf("%s: %d, want %d saying %q\n%s", c.name, got.status, c.status, c.says, got.body)
		}
		if got := e.limitOf("api"); got == nil || *got != kept {
			t.Fatalf("%s: the store holds %+v, want %+v", c.name, got, kept)
		}
		if got := e.limitOf("other"); got != nil {
			t.Fatalf("%s: the store holds %+v", c.name, got)
		}
	}
	// The same post with full access and the form token goes through.
	if r := e.do(req{method: "POST", path: "/limits", token: fullToken, form: set(csrf)}); r.status != http.StatusSeeOther {
		t.Fatalf("set with full access: %d\n%s", r.status, r.body)
	}
	if got := e.limitOf("api"); got == nil || got.Concurrency != 9 {
		t.Fatalf("after the set with full access the store holds %+v", got)
	}
}

// TestLimitOddKeys: keys and templates with characters that URLs, HTML or
// paths treat specially are set, listed, edited from their Edit link and
// deleted from their Delete button as the page gives them.
func TestLimitOddKeys(t *testing.T) {
	e := newEnv(t, true)
	keys := []string{
		"customer:*", "tenant/eu/*", "a/b", "..", ".", "100%", "q?x=1&y=2#frag", "a+b;c=d",
		`x"><script>alert(1)</script>`, "é/ü*", "%2F", "delete",
	}
	_, csrf := e.limitsPage("")
	for i, k := range keys {
		r := e.do(req{method: "POST", path: "/limits", token: fullToken, form: limitFormValues(csrf, k, strconv.Itoa(i+1))})
		if r.status != http.StatusSeeOther {
			t.Fatalf("set %q: %d\n%s", k, r.status, r.body)
		}
		loc, err := url.Parse(r.header.Get("Location"))
		if err != nil || loc.Path != "/limits" || loc.Query().Get("key") != k {
			t.Fatalf("set %q: to %q", k, r.header.Get("Location"))
		}
		if got := e.limitOf(k); got == nil || got.Concurrency != i+1 {
			t.Fatalf("set %q: the store holds %+v", k, got)
		}
		if p := e.do(req{path: loc.String(), token: fullToken}); !strings.Contains(html.UnescapeString(p.body), "Limit "+k+" created: "+strconv.Itoa(i+1)+" at once.") {
			t.Errorf("set %q: no flash naming it:\n%s", k, p.body)
		}
	}
	page, csrf := e.limitsPage("")
	if strings.Contains(page.body, "<script>") {
		t.Fatal("a key's markup reached the page unescaped")
	}
	edits := map[string]string{}
	for _, m := range regexp.MustCompile(`<a href="([^"]+)" class="edit" aria-label="Edit limit ([^"]*)">`).FindAllStringSubmatch(page.body, -1) {
		edits[html.UnescapeString(m[2])] = html.UnescapeString(m[1])
	}
	deletes := map[string]string{}
	for _, m := range regexp.MustCompile(`name="key" value="([^"]*)">\s*<button type="submit" class="danger" aria-label="Delete limit ([^"]*)">`).FindAllStringSubmatch(page.body, -1) {
		deletes[html.UnescapeString(m[2])] = html.UnescapeString(m[1])
	}
	for i, k := range keys {
		href, ok := edits[k]
		if !ok {
			t.Errorf("%q has no Edit link (links: %q)", k, edits)
			continue
		}
		p := e.do(req{path: href, token: fullToken})
		if p.status != http.StatusOK || !strings.Contains(p.body, "Edit the limit") {
			t.Errorf("%q: its Edit link %s: %d\n%s", k, href, p.status, p.body)
			continue
		}
		if got := inputValue(t, p.body, "key"); got != k {
			t.Errorf("%q: its Edit link fills the key with %q", k, got)
		}
		if got := inputValue(t, p.body, "concurrency"); got != strconv.Itoa(i+1) {
			t.Errorf("%q: its Edit link fills the concurrency with %q", k, got)
		}
		value, ok := deletes[k]
		if !ok {
			t.Errorf("%q has no Delete button", k)
			continue
		}
		if r := e.do(req{method: "POST", path: "/limits/delete", token: fullToken, form: url.Values{csrfField: {csrf}, "key": {value}}}); r.status != http.StatusSeeOther {
			t.Errorf("delete %q: %d\n%s", k, r.status, r.body)
		}
		if got := e.limitOf(k); got != nil {
			t.Errorf("after its delete %q is still declared: %+v", k, got)
		}
	}
	if ls, err := e.store.ListLimits(context.Background()); err != nil || len(ls) != 0 {
		t.Fatalf("after every delete: %+v %v", ls, err)
	}
}
