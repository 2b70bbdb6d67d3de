package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestNoLooseInput: ids, list parameters, claim queues and query strings
// are read one way only. "+1" and "01" were job 1, "?queue=" was no
// filter, "queues":[] claimed from default, and a query string on a route
// that reads none was ignored.
func TestNoLooseInput(t *testing.T) {
	e := newEnv(t, nil)
	j := e.enqueue(`{"kind":"a"}`)
	if j.ID != 1 {
		t.Fatalf("first job has id %d", j.ID)
	}
	for _, p := range []string{"+1", "01", "1.0", "1e0", " 1", "0x1", "-1", "0"} {
		e.wantError("GET", "/v1/jobs/"+p, "", http.StatusBadRequest, CodeInvalidField, "id")
		e.wantError("POST", "/v1/jobs/"+p+"/cancel", "", http.StatusBadRequest, CodeInvalidField, "id")
	}
	for q, field := range map[string]string{
		"queue=": "queue", "state=": "state", "kind=": "kind", "group=": "group", "cursor=": "cursor", "limit=": "limit",
		"limit=+5": "limit", "limit=05": "limit", "limit=1001": "limit", "cursor=+5": "cursor", "cursor=007": "cursor",
	} {
		e.wantError("GET", "/v1/jobs?"+q, "", http.StatusBadRequest, CodeInvalidField, field)
	}
	e.wantError("POST", "/v1/claim", `{"worker":"w","queues":[]}`, http.StatusBadRequest, CodeInvalidField, "queues")
	if got := e.get(1); got.State != "pending" {
		t.Fatalf("a rejected claim changed the job: %+v", got)
	}
	if jobs := e.claim(`{"worker":"w","queues":null}`); len(jobs) != 1 {
		t.Errorf(`"queues":null claimed %d jobs, want 1 (from default)`, len(jobs))
	}
	// A query string on a route that reads none is refused, not ignored:
	// the job went to the default queue, and the stats were every queue's.
	e.wantError("POST", "/v1/jobs?queue=mail&priority=5", `{"kind":"qp"}`, http.StatusBadRequest, CodeInvalidField, "priority")
	e.wantError("POST", "/v1/jobs?queue=mail", `{"kind":"qp"}`, http.StatusBadRequest, CodeInvalidField, "queue")
	e.wantError("POST", "/v1/jobs?queue=%zz", `{"kind":"qp"}`, http.StatusBadRequest, CodeInvalidField, "")
	e.wantError("GET", "/v1/stats?queue=mail", "", http.StatusBadRequest, CodeInvalidField, "queue")
	e.wantError("POST", "/v1/claim?limit=5", `{"worker":"w"}`, http.StatusBadRequest, CodeInvalidField, "limit")
	e.wantError("GET", "/v1/queues?x%20y=1", "", http.StatusBadRequest, CodeInvalidField, "x y")
	var list struct{ Jobs []Job }
	e.must("GET", "/v1/jobs?kind=qp", "", http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Errorf("a refused enqueue stored %d jobs", len(list.Jobs))
	}
	for _, p := range []string{"/healthz?probe=1", "/v1/jobs/1/relatives?limit=5", "/v1/jobs/1/flow?limit=5"} {
		if st, b := e.do("GET", p, ""); st != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, st, b)
		}
	}
}

// TestStaleTokenMessage: a token that was never issued is not described
// as a lease that expired and was rescued.
func TestStaleTokenMessage(t *testing.T) {
	e := newEnv(t, nil)
	j := e.enqueue(`{"kind":"a"}`)
	e.claim(`{"worker":"w"}`)
	status, b := e.do("POST", "/v1/jobs/"+itoa(j.ID)+"/complete", `{"token":"0123456789abcdef0123456789abcdef"}`)
	checkError(t, "complete with a token never issued", status, b, http.StatusConflict, CodeStaleToken, "")
	if msg := string(b); strings.Contains(msg, "rescued") || !strings.Contains(msg, "not this job's current claim") {
		t.Errorf("stale token message: %s", msg)
	}
}
