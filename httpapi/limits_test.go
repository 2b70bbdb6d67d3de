package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestLimitsOverHTTP declares, replaces, reads and deletes limits, with a
// template governing a key whose job runs, on both stores.
func TestLimitsOverHTTP(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) { checkLimits(t, newE(t, nil)) })
	}
}

func checkLimits(t *testing.T, e *testEnv) {
	var l Limit
	e.must("PUT", "/v1/limits/customer:*", `{"concurrency":5,"rate":10}`, http.StatusCreated, &l)
	if l != (Limit{Key: "customer:*", Concurrency: 5, Rate: 10, PerSeconds: 1, Burst: 10, Weight: 1}) {
		t.Errorf("PUT created %+v, want the defaults filled in (per 1 s, burst 10)", l)
	}
	e.must("PUT", "/v1/limits/customer:%2A", `{"concurrency":2,"rate":10,"per_seconds":3600,"burst":20}`, http.StatusOK, &l)
	if l != (Limit{Key: "customer:*", Concurrency: 2, Rate: 10, PerSeconds: 3600, Burst: 20, Weight: 1}) {
		t.Errorf("PUT replaced %+v", l)
	}
	e.must("PUT", "/v1/limits/api:stripe", `{"concurrency":1}`, http.StatusCreated, &l)
	if l != (Limit{Key: "api:stripe", Concurrency: 1, Weight: 1}) {
		t.Errorf("PUT of a limit without a rate answered %+v", l)
	}

	// A job of customer:42 runs: its key appears under the template.
	e.enqueue(`{"kind":"sync","group":"customer:42"}`)
	if jobs := e.claim(`{"worker":"w"}`); len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	var li LimitInfo
	e.must("GET", "/v1/limits/customer:*", "", http.StatusOK, &li)
	if li.Key != "customer:*" || li.Concurrency != 2 || li.Burst != 20 || len(li.Keys) != 1 {
		t.Fatalf("GET customer:* = %+v, want one key", li)
	}
	if k := li.Keys[0]; k.Key != "customer:42" || k.Limit != "customer:*" || k.Running != 1 || k.Concurrency != 2 || k.Tokens != 19 {
		t.Errorf("customer:42's state = %+v, want 1 running of 2 and 19 tokens left", k)
	}
	var all LimitsResponse
	e.must("GET", "/v1/limits", "", http.StatusOK, &all)
	if len(all.Limits) != 2 || all.Limits[0].Key != "api:stripe" || all.Limits[1].Key != "customer:*" || all.Limits[0].Keys == nil {
		t.Errorf("GET /v1/limits = %+v, want both limits by key, keys never null", all)
	}
	if b := e.must("GET", "/v1/limits/api:stripe", "", http.StatusOK, nil); !strings.Contains(string(b), `"keys":[]`) {
		t.Errorf("a limit without keys: %s, want \"keys\":[]", b)
	}

	// A key, not a template: GET names the limit exactly.
	e.wantError("GET", "/v1/limits/customer:42", "", http.StatusNotFound, CodeNotFound, "")
	e.must("DELETE", "/v1/limits/customer:*", "", http.StatusNoContent, nil)
	e.wantError("DELETE", "/v1/limits/customer:*", "", http.StatusNotFound, CodeNotFound, "")
	status, b := e.do("GET", "/v1/limits/customer:*", "")
	var eb ErrorBody
	if status != http.StatusNotFound || json.Unmarshal(b, &eb) != nil || eb.Error.Message != "limit not found" {
		t.Errorf("GET of a deleted limit: %d %s, want 404 \"limit not found\"", status, b)
	}
	e.must("GET", "/v1/limits", "", http.StatusOK, &all)
	if len(all.Limits) != 1 {
		t.Errorf("after the delete: %+v", all)
	}
}

// TestLimitWeightsOverHTTP: a weight is declared, alone or with other
// bounds, and read back as stored; left out or 0 it is 1, on both stores.
func TestLimitWeightsOverHTTP(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) { checkLimitWeights(t, newE(t, nil)) })
	}
}

func checkLimitWeights(t *testing.T, e *testEnv) {
	var l Limit
	e.must("PUT", "/v1/limits/heavy", `{"weight":3}`, http.StatusCreated, &l)
	if l != (Limit{Key: "heavy", Weight: 3}) {
		t.Errorf("PUT of a weight alone answered %+v, want weight 3 and no bound", l)
	}
	e.must("PUT", "/v1/limits/open:*", `{}`, http.StatusCreated, &l)
	if l != (Limit{Key: "open:*", Weight: 1}) {
		t.Errorf("PUT of {} answered %+v, want no bound, no rate, weight 1", l)
	}
	e.must("PUT", "/v1/limits/tenant:*", `{"concurrency":2,"rate":5,"weight":100}`, http.StatusCreated, &l)
	if l != (Limit{Key: "tenant:*", Concurrency: 2, Rate: 5, PerSeconds: 1, Burst: 5, Weight: 100}) {
		t.Errorf("PUT with weight 100 answered %+v", l)
	}
	e.must("PUT", "/v1/limits/zero", `{"concurrency":1,"weight":0}`, http.StatusCreated, &l)
	if l.Weight != 1 {
		t.Errorf("PUT with weight 0 answered weight %d, want 1", l.Weight)
	}
	b := e.must("PUT", "/v1/limits/plain", `{"concurrency":1}`, http.StatusCreated, &l)
	if l.Weight != 1 || !strings.Contains(string(b), `"weight":1`) {
		t.Errorf("PUT without a weight answered %s, want \"weight\":1", b)
	}
	for key, want := range map[string]int{"heavy": 3, "tenant:*": 100, "zero": 1, "plain": 1} {
		var li LimitInfo
		e.must("GET", "/v1/limits/"+key, "", http.StatusOK, &li)
		if li.Weight != want {
			t.Errorf("GET %s: weight %d, want %d", key, li.Weight, want)
		}
	}
	var all LimitsResponse
	e.must("GET", "/v1/limits", "", http.StatusOK, &all)
	got := map[string]int{}
	for _, li := range all.Limits {
		got[li.Key] = li.Weight
	}
	if len(got) != 5 || got["heavy"] != 3 || got["tenant:*"] != 100 || got["zero"] != 1 || got["plain"] != 1 || got["open:*"] != 1 {
		t.Errorf("GET /v1/limits weights = %v", got)
	}
	// Replacing the limit replaces its weight; leaving it out makes it 1.
	e.must("PUT", "/v1/limits/heavy", `{"weight":7}`, http.StatusOK, &l)
	e.must("PUT", "/v1/limits/heavy", `{"concurrency":4}`, http.StatusOK, &l)
	var li LimitInfo
	e.must("GET", "/v1/limits/heavy", "", http.StatusOK, &li)
	if li.Concurrency != 4 || li.Weight != 1 {
		t.Errorf("heavy replaced without a weight: %+v, want concurrency 4, weight 1", li.Limit)
	}
}

// TestLimitKeysInPaths: keys hold characters a path must escape ("/",
// "?", "%", spaces are refused), and "." and "..", escaped, are keys
// too; each is one path segment, found again as it was declared.
func TestLimitKeysInPaths(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ path, key string }{
		{"/v1/limits/a%2Fb", "a/b"},
		{"/v1/limits/q%3Fx%23y", "q?x#y"},
		{"/v1/limits/100%25", "100%"},
		{"/v1/limits/%2E%2E", ".."},
		{"/v1/limits/tenant:%C3%A9t%C3%A9:*", "tenant:été:*"},
	} {
		var l Limit
		e.must("PUT", tc.path, `{"concurrency":3}`, http.StatusCreated, &l)
		if l.Key != tc.key {
			t.Errorf("PUT %s declared %q, want %q", tc.path, l.Key, tc.key)
		}
		var li LimitInfo
		e.must("GET", tc.path, "", http.StatusOK, &li)
		if li.Key != tc.key {
			t.Errorf("GET %s = %q, want %q", tc.path, li.Key, tc.key)
		}
		var g TokenGrant
		if !strings.HasSuffix(tc.key, "*") {
			e.must("POST", tc.path+"/tokens", "", http.StatusOK, &g)
			if !g.Granted || g.RetryAt != nil {
				t.Errorf("tokens of %q, which has no rate: %+v, want granted", tc.key, g)
			}
		}
		e.must("DELETE", tc.path, "", http.StatusNoContent, nil)
	}
	// A "/" left unescaped makes another path: no such route.
	e.wantError("GET", "/v1/limits/a/b", "", http.StatusNotFound, CodeNotFound, "")
	e.wantError("PUT", "/v1/limits/a/b", `{"concurrency":1}`, http.StatusNotFound, CodeNotFound, "")
}

// TestLimitsRejectBadInput: 400 naming the field, and nothing declared.
func TestLimitsRejectBadInput(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ method, path, body, code, field string }{
		{"PUT", "/v1/limits/k", ``, CodeMalformedJSON, ""},
		{"PUT", "/v1/limits/k", `{"concurrency":`, CodeMalformedJSON, ""},
		{"PUT", "/v1/limits/k", `{"concurrency":-1}`, CodeInvalidField, "concurrency"},
		{"PUT", "/v1/limits/k", `{"concurrency":10001}`, CodeInvalidField, "concurrency"},
		{"PUT", "/v1/limits/k", `{"concurrency":"5"}`, CodeInvalidField, "concurrency"},
		{"PUT", "/v1/limits/k", `{"rate":-1}`, CodeInvalidField, "rate"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"burst":5}`, CodeInvalidField, "rate"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"per_seconds":2}`, CodeInvalidField, "rate"},
		{"PUT", "/v1/limits/k", `{"rate":10,"per_seconds":-1}`, CodeInvalidField, "per_seconds"},
		{"PUT", "/v1/limits/k", `{"rate":10,"per_seconds":86401}`, CodeInvalidField, "per_seconds"},
		{"PUT", "/v1/limits/k", `{"rate":1,"per_seconds":1e-300}`, CodeInvalidField, "per_seconds"},
		{"PUT", "/v1/limits/k", `{"rate":1,"per_seconds":1e999}`, CodeInvalidField, "per_seconds"},
		{"PUT", "/v1/limits/k", `{"rate":10,"per":"1s"}`, CodeInvalidField, "per"},
		{"PUT", "/v1/limits/k", `{"rate":2000000}`, CodeInvalidField, "rate"},
		// Judged as declared (0.98µs between starts), not as rounded up to
		// a whole microsecond.
		{"PUT", "/v1/limits/k", `{"rate":5,"per_seconds":0.0000049}`, CodeInvalidField, "rate"},
		{"PUT", "/v1/limits/k", `{"rate":10,"burst":1000001}`, CodeInvalidField, "burst"},
		{"PUT", "/v1/limits/k", `{"rate":10,"burst":-1}`, CodeInvalidField, "burst"},
		{"PUT", "/v1/limits/k", `{"weight":101}`, CodeInvalidField, "weight"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"weight":-1}`, CodeInvalidField, "weight"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"weight":1.5}`, CodeInvalidField, "weight"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"weight":"3"}`, CodeInvalidField, "weight"},
		{"PUT", "/v1/limits/k", `{"concurrency":1,"key":"other"}`, CodeInvalidField, "key"},
		{"PUT", "/v1/limits/a*b", `{"concurrency":1}`, CodeInvalidField, "key"},
		{"PUT", "/v1/limits/a%20b", `{"concurrency":1}`, CodeInvalidField, "key"},
		{"PUT", "/v1/limits/" + strings.Repeat("k", 129), `{"concurrency":1}`, CodeInvalidField, "key"},
		{"GET", "/v1/limits/a*b", ``, CodeInvalidField, "key"},
		{"DELETE", "/v1/limits/a%09b", ``, CodeInvalidField, "key"},
		{"POST", "/v1/limits/a%20b/tokens", ``, CodeInvalidField, "key"},
		{"POST", "/v1/limits/customer:*/tokens", ``, CodeInvalidField, "key"},
		{"POST", "/v1/limits/k/tokens", `{"n":0}`, CodeInvalidField, "n"},
		{"POST", "/v1/limits/k/tokens", `{"n":1000001}`, CodeInvalidField, "n"},
		{"POST", "/v1/limits/k/tokens", `{"n":"1"}`, CodeInvalidField, "n"},
		{"POST", "/v1/limits/k/tokens", `{"m":1}`, CodeInvalidField, "m"},
		{"POST", "/v1/limits/k/tokens", `[1]`, CodeMalformedJSON, ""},
	} {
		e.wantError(tc.method, tc.path, tc.body, http.StatusBadRequest, tc.code, tc.field)
	}
	var all LimitsResponse
	e.must("GET", "/v1/limits", "", http.StatusOK, &all)
	if len(all.Limits) != 0 {
		t.Errorf("rejected requests declared %+v", all.Limits)
	}
	// A weight out of range says its bounds.
	for _, body := range []string{`{"weight":101}`, `{"concurrency":1,"weight":-1}`} {
		var eb ErrorBody
		if _, b := e.do("PUT", "/v1/limits/k", body); json.Unmarshal(b, &eb) != nil || !strings.Contains(eb.Error.Message, "between 1 and 100") {
			t.Errorf("PUT %s: %s, want the message to give the bounds of weight", body, b)
		}
	}
	// The key in the path is named as such.
	_, b := e.do("PUT", "/v1/limits/a*b", `{"concurrency":1}`)
	if !strings.Contains(string(b), "the key in the path") {
		t.Errorf("a bad key: %s, want the message to name the path", b)
	}
}

// TestTakeTokensOverHTTP: all or none, a refusal with retry_at and
// Retry-After, more than the burst refused as a 400, and a key without a
// rate granting everything.
func TestTakeTokensOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	e.must("PUT", "/v1/limits/api:*", `{"rate":1,"per_seconds":3600,"burst":2}`, http.StatusCreated, nil)
	take := func(key, body string) (TokenGrant, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), "POST", e.srv.URL+"/v1/limits/"+key+"/tokens", stringsReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST tokens of %s %s: %d %s", key, body, resp.StatusCode, b)
		}
		var g TokenGrant
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"retry_at":`) {
			t.Errorf("tokens answered %s, want retry_at present (null when granted)", b)
		}
		return g, resp.Header
	}
	if g, h := take("api:a", `{"n":2}`); !g.Granted || g.RetryAt != nil || h.Get("Retry-After") != "" {
		t.Errorf("2 tokens of a full burst of 2: %+v, Retry-After %q", g, h.Get("Retry-After"))
	}
	g, h := take("api:a", ``)
	if g.Granted || g.RetryAt == nil {
		t.Fatalf("a token of an empty bucket: %+v, want refused with retry_at", g)
	}
	if d := time.Until(*g.RetryAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("retry_at in %v, want about an hour (one token an hour)", d)
	}
	if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 3500 || secs > 3601 {
		t.Errorf("Retry-After %q, want about 3600", h.Get("Retry-After"))
	}
	// Each key of the template has a bucket of its own.
	if g, _ := take("api:b", `{}`); !g.Granted {
		t.Errorf("api:b's first token: %+v", g)
	}
	e.wantError("POST", "/v1/limits/api:c/tokens", `{"n":3}`, http.StatusBadRequest, CodeInvalidField, "n")
	if g, _ := take("free", `{"n":1000000}`); !g.Granted {
		t.Errorf("a key without a rate: %+v, want granted", g)
	}
}

// TestLimitsAuth: read-only tokens read limits and change none; no token,
// nothing.
func TestLimitsAuth(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Tokens = []string{"full-0123456789abcdef"}
		c.ReadTokens = []string{"ro-0123456789abcdef"}
	})
	ctx := context.Background()
	for _, tc := range []struct {
		method, path, body, token string
		status                    int
	}{
		{"PUT", "/v1/limits/k", `{"concurrency":2}`, "ro-0123456789abcdef", http.StatusForbidden},
		{"PUT", "/v1/limits/k", `{"concurrency":2}`, "", http.StatusUnauthorized},
		{"PUT", "/v1/limits/k", `{"concurrency":2}`, "full-0123456789abcdef", http.StatusCreated},
		{"GET", "/v1/limits", ``, "ro-0123456789abcdef", http.StatusOK},
		{"GET", "/v1/limits/k", ``, "ro-0123456789abcdef", http.StatusOK},
		{"GET", "/v1/limits", ``, "", http.StatusUnauthorized},
		{"GET", "/v1/limits/k", ``, "nope", http.StatusUnauthorized},
		{"POST", "/v1/limits/k/tokens", `{"n":1}`, "ro-0123456789abcdef", http.StatusForbidden},
		{"POST", "/v1/limits/k/tokens", `{"n":1}`, "full-0123456789abcdef", http.StatusOK},
		{"DELETE", "/v1/limits/k", ``, "ro-0123456789abcdef", http.StatusForbidden},
		{"DELETE", "/v1/limits/k", ``, "", http.StatusUnauthorized},
		{"DELETE", "/v1/limits/k", ``, "full-0123456789abcdef", http.StatusNoContent},
	} {
		if status, b := e.doCtx(ctx, tc.method, tc.path, tc.body, tc.token); status != tc.status {
			t.Errorf("%s %s with token %q: %d %s, want %d", tc.method, tc.path, tc.token, status, b, tc.status)
		}
	}
}

func FuzzDecodePutLimit(f *testing.F) {
	for _, s := range []string{
		`{"concurrency":5,"rate":10,"per_seconds":1,"burst":20}`,
		`{"concurrency":1}`,
		`{"rate":3,"per_seconds":0.000001}`,
		`{"rate":1,"per_seconds":86400,"burst":1000000}`,
		`{"rate":10,"per_seconds":0}`,
		`{}`,
		`{"per_seconds":1}`,
		`{"rate":1e3}`,
		`{"concurrency":1,"per":"1s"}`,
		`{"weight":3}`,
		`{"concurrency":2,"weight":100}`,
		`{"concurrency":1,"weight":0}`,
		``,
	} {
		f.Add("customer:*", []byte(s))
	}
	f.Add("a*b", []byte(`{"concurrency":1}`))
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		l, ae := decodePutLimit(key, body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		again, err := l.Normalize()
		if err != nil || again != l {
			t.Fatalf("accepted %+v, which Normalize makes %+v, %v", l, again, err)
		}
		if l.Key != key {
			t.Fatalf("accepted the limit of %q for %q", l.Key, key)
		}
	})
}

func FuzzDecodeTakeTokens(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"n":1}`, `{"n":0}`, `{"n":1000000}`, `{"n":-1}`, `{"n":1.5}`, `{"n":null}`, ` `, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		n, ae := decodeTakeTokens(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if n < 1 || n > readpast.MaxTakeTokens {
			t.Fatalf("accepted n %d", n)
		}
	})
}
