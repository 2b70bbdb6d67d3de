package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	e := newEnv(t, nil)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	dec := json.NewDecoder(bytes.NewReader(openAPIDoc))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}

	// Every route of the mux (metrics included) is in the document.
	s, err := newServer(Config{Store: e.store, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, rt := range s.routes {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			t.Fatalf("route %q has no method", rt.pattern)
		}
		routes[strings.ToLower(method)+" "+path] = true
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("openapi.json lacks path %s", path)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("openapi.json lacks %s %s", method, path)
		}
		// The handler answers the route (not with "no such route").
		if _, pattern := s.mux.Handler(mustRequest(t, method, strings.NewReplacer("{id}", "1", "{name}", "n", "{key}", "k").Replace(path))); pattern != rt.pattern {
			t.Errorf("mux routes %s %s to %q", method, path, pattern)
		}
	}
	// And the document describes no route that does not exist.
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "parameters", "summary", "description":
				continue
			}
			if !routes[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which the server does not serve", strings.ToUpper(method), path)
			}
		}
	}

	// Every $ref resolves.
	var whole any
	if err := json.Unmarshal(openAPIDoc, &whole); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if ref, ok := x.(string); ok && k == "$ref" {
					if !resolves(whole, ref) {
						t.Errorf("$ref %s does not resolve", ref)
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(whole)

	// The server serves the embedded document as it is.
	got := e.must("GET", "/v1/openapi.json", "", 200, nil)
	if !bytes.Equal(got, openAPIDoc) {
		t.Error("GET /v1/openapi.json differs from the embedded document")
	}

	// Every error code the server uses is listed in the Error schema.
	for _, code := range []string{CodeMalformedJSON, CodeInvalidField, CodeTooLarge, CodeBatchTooLarge, CodeUnauthorized,
		CodeForbidden, CodeCrossOrigin, CodeHostNotAllowed, CodeNotFound, CodeMethodNotAllowed, CodeStaleToken, CodeInvalidState, CodeUnavailable, CodeInternal} {
		if !bytes.Contains(openAPIDoc, []byte(`"`+code+`"`)) {
			t.Errorf("openapi.json does not list error code %s", code)
		}
	}
}

// resolves reports whether a local JSON pointer ref ("#/a/b") names a
// value in doc.
func resolves(doc any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	cur := doc
	for _, part := range strings.Split(p, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// mustRequest makes a server-side request for routing checks.
func mustRequest(t *testing.T, method, path string) *http.Request {
	t.Helper()
	return httptest.NewRequest(method, path, nil)
}

// TestOpenAPIDocumentsOversizedBodies: every operation that answers 413
// to a body over --max-body-bytes lists 413 in the document, and every
// one that lists body_too_large does answer it, body-less POSTs
// included (they read the body to refuse one).
func TestOpenAPIDocumentsOversizedBodies(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 64 })
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{id}", "1", "{name}", "n", "{key}", "k")
	big := `{"kind":"` + strings.Repeat("x", 100) + `"}`
	tried := 0
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			method = strings.ToUpper(method)
			if method != "POST" && method != "PUT" {
				continue
			}
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			tried++
			status, body := e.do(method, fill.Replace(path), big)
			_, documented := op.Responses["413"]
			switch {
			case status == http.StatusRequestEntityTooLarge && !documented:
				t.Errorf("%s %s answers 413 to a large body, which the document does not list: %s", method, path, body)
			case status != http.StatusRequestEntityTooLarge && documented && strings.Contains(string(op.Responses["413"]), "TooLarge"):
				t.Errorf("%s %s lists body_too_large but answered %d to a large body: %s", method, path, status, body)
			}
		}
	}
	if tried < 20 {
		t.Fatalf("tried %d operations; the document has more", tried)
	}
}
