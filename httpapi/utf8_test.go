package httpapi

import (
	"net/http"
	"testing"
)

// TestNamesMustBeUTF8: a name that is not valid UTF-8, in a body or in a
// path, is a 400 naming its field, and nothing is stored. encoding/json
// alone turns the bytes into U+FFFD, so "u\xfe" and "u\xff" would be one
// unique key, and a path value would be stored as raw bytes (which
// PostgreSQL's text refuses).
func TestNamesMustBeUTF8(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { checkNamesMustBeUTF8(t, newEnv(t, nil)) })
	t.Run("postgres", func(t *testing.T) { checkNamesMustBeUTF8(t, newPostgresEnv(t, nil)) })
}

func checkNamesMustBeUTF8(t *testing.T, e *testEnv) {
	bodies := []struct{ path, body, field string }{
		{"/v1/jobs", "{\"kind\":\"a\xff\"}", "kind"},
		{"/v1/jobs", "{\"kind\":\"a\",\"queue\":\"q\xfe\"}", "queue"},
		{"/v1/jobs", "{\"kind\":\"a\",\"group\":\"g\xff\"}", "group"},
		{"/v1/jobs", "{\"kind\":\"a\",\"keys\":[\"k\",\"k\xff\"]}", "keys"},
		{"/v1/jobs", "{\"kind\":\"a\",\"tags\":[\"t\xff\"]}", "tags"},
		{"/v1/jobs", "{\"kind\":\"a\",\"unique_key\":\"u\xfe\"}", "unique_key"},
		{"/v1/jobs", "{\"kind\":\"a\",\"unique_key\":\"u\xff\"}", "unique_key"},
		{"/v1/jobs", "{\"kind\":\"a\",\"run_at\":\"2030-01-01T00:00:00Z\xff\"}", "run_at"},
		{"/v1/jobs/batch", "{\"jobs\":[{\"kind\":\"a\"},{\"kind\":\"b\xff\"}]}", "jobs[1].kind"},
		{"/v1/flows", "{\"jobs\":[{\"ref\":\"r\xff\",\"kind\":\"a\"}]}", "jobs[0].ref"},
		{"/v1/claim", "{\"worker\":\"w\xff\"}", "worker"},
		{"/v1/claim", "{\"worker\":\"w\",\"queues\":[\"q\xff\"]}", "queues"},
		{"/v1/bulk/cancel", "{\"queue\":\"q\xff\"}", "queue"},
		// An unpaired surrogate escape is valid JSON that encoding/json
		// also reads as U+FFFD.
		{"/v1/jobs", `{"kind":"a","unique_key":"u\ud800"}`, "unique_key"},
		{"/v1/jobs", `{"kind":"k\udc00"}`, "kind"},
		{"/v1/jobs", `{"kind":"a","tags":["ok","t\udfff"]}`, "tags"},
		{"/v1/jobs/batch", `{"jobs":[{"kind":"a","queue":"q\ud800x"}]}`, "jobs[0].queue"},
	}
	for _, c := range bodies {
		e.wantError("POST", c.path, c.body, http.StatusBadRequest, CodeInvalidField, c.field)
	}
	paths := []struct{ method, path, body, field string }{
		{"POST", "/v1/queues/q%FF/pause", "", "queue"},
		{"PUT", "/v1/limits/k%FF", "{}", "key"},
		{"PUT", "/v1/limits/k%FE*", "{}", "key"},
		{"POST", "/v1/limits/k%FF/tokens", "", "key"},
		{"PUT", "/v1/schedules/s%FF", `{"cron":"@every 1h","job":{"kind":"a"}}`, "name"},
		{"GET", "/v1/jobs?queue=q%FF", "", "queue"},
		{"GET", "/v1/jobs?tag=t%FF", "", "tag"},
	}
	for _, c := range paths {
		e.wantError(c.method, c.path, c.body, http.StatusBadRequest, CodeInvalidField, c.field)
	}
	// A schedule name no schedule can have is not found, as one with a
	// space is.
	for _, m := range []string{"GET", "DELETE"} {
		e.wantError(m, "/v1/schedules/s%FF", "", http.StatusNotFound, CodeNotFound, "")
	}
	e.wantError("POST", "/v1/schedules/s%FF/run", "", http.StatusNotFound, CodeNotFound, "")
	if n := e.total(); n != 0 {
		t.Errorf("names that are not UTF-8 stored %d jobs", n)
	}
	var qs QueuesResponse
	e.must("GET", "/v1/queues", "", http.StatusOK, &qs)
	if len(qs.Queues) != 0 {
		t.Errorf("queues after refused names: %+v", qs.Queues)
	}
	var ls LimitsResponse
	e.must("GET", "/v1/limits", "", http.StatusOK, &ls)
	if len(ls.Limits) != 0 {
		t.Errorf("limits after refused names: %+v", ls.Limits)
	}

	// U+FFFD itself is a character like any other: the two keys below
	// differ from each other and from the refused ones.
	a := e.enqueue("{\"kind\":\"a\",\"unique_key\":\"u\uFFFD\"}")
	b := e.enqueue("{\"kind\":\"a\",\"unique_key\":\"u\uFFFD\uFFFD\"}")
	if a.ID == b.ID || e.get(a.ID).UniqueKey != "u\uFFFD" {
		t.Errorf("keys with U+FFFD: jobs %+v and %+v", a, b)
	}

	// An error message is free text: what a worker reports is kept,
	// cleaned, whatever its characters.
	c := e.claim(`{"worker":"w"}`)[0]
	e.must("POST", "/v1/jobs/"+itoa(c.ID)+"/fail", `{"token":"`+c.Token+`","error":"bad \ud800 byte","stack":"at \udc00"}`, http.StatusOK, nil)
	if j := e.get(c.ID); len(j.Errors) != 1 || j.Errors[0].Message != "bad \uFFFD byte" {
		t.Errorf("a failure with a lone surrogate: %+v", j.Errors)
	}
}
