package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/readpast/readpast"
)

// TestFlowRelativesAndGraph: GET /v1/jobs/{id}/relatives lists a job's
// parents and children with their edges (refs, policy, state) and jobs;
// GET /v1/jobs/{id}/flow returns the connected jobs breadth first with
// the edges between them, truncated at limit; bad ids and limits are 400,
// unknown jobs 404.
func TestFlowRelativesAndGraph(t *testing.T) {
	flowStores(t, func(t *testing.T, e *testEnv) {
		before := e.enqueue(`{"kind":"prior","queue":"ri"}`)
		jobs := e.enqueueFlow(fmt.Sprintf(`{"jobs":[
			{"ref":"a","kind":"extract","queue":"ri"},
			{"ref":"b","kind":"render","queue":"ri","after":[{"ref":"a"}]},
			{"kind":"email","queue":"ri","after":[{"ref":"a","policy":"run_anyway"},{"ref":"b"},{"job_id":%d,"policy":"hold_child"}]}
		]}`, before.ID), 3)
		a, b, c := jobs[0], jobs[1], jobs[2]

		var rel RelativesResponse
		e.must("GET", fmt.Sprintf("/v1/jobs/%d/relatives", c.ID), "", http.StatusOK, &rel)
		if len(rel.Children) != 0 || len(rel.Parents) != 3 {
			t.Fatalf("relatives of the email job: %+v; want three parents, no children", rel)
		}
		want := []readpast.Edge{
			{ParentID: before.ID, ChildID: c.ID, Policy: readpast.HoldChild, State: readpast.EdgeOpen},
			{ParentID: a.ID, ChildID: c.ID, ParentRef: "a", Policy: readpast.RunAnyway, State: readpast.EdgeOpen},
			{ParentID: b.ID, ChildID: c.ID, ParentRef: "b", Policy: readpast.CancelChild, State: readpast.EdgeOpen},
		}
		for i, w := range want {
			if p := rel.Parents[i]; p.Edge != w || p.Job == nil || p.Job.ID != w.ParentID {
				t.Fatalf("parents[%d] = %+v (job %+v), want edge %+v with its parent", i, p.Edge, p.Job, w)
			}
		}
		raw := e.must("GET", fmt.Sprintf("/v1/jobs/%d/relatives?limit=1", a.ID), "", http.StatusOK, &rel)
		if len(rel.Parents) != 0 || len(rel.Children) != 1 || rel.Children[0].Job.ID != b.ID ||
			rel.Children[0].Edge.ChildRef != "b" || rel.Children[0].Job.State != readpast.StateBlocked {
			t.Fatalf("relatives of a, limit 1: %s; want child b only, blocked", raw)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || string(m["parents"]) != "[]" {
			t.Fatalf("relatives of a: parents %s, want [] (never null): %v", m["parents"], err)
		}

		var g FlowGraphResponse
		e.must("GET", fmt.Sprintf("/v1/jobs/%d/flow", b.ID), "", http.StatusOK, &g)
		var order []int64
		for _, j := range g.Jobs {
			order = append(order, j.ID)
		}
		if fmt.Sprint(order) != fmt.Sprint([]int64{b.ID, a.ID, c.ID, before.ID}) || len(g.Edges) != 4 || g.Truncated {
			t.Fatalf("flow of b: jobs %v, %d edges, truncated %v; want [b a c prior], 4 edges, whole", order, len(g.Edges), g.Truncated)
		}
		e.must("GET", fmt.Sprintf("/v1/jobs/%d/flow?limit=2", b.ID), "", http.StatusOK, &g)
		if len(g.Jobs) != 2 || !g.Truncated || len(g.Edges) != 1 || g.Edges[0].ParentID != a.ID || g.Edges[0].ChildID != b.ID {
			t.Fatalf("flow of b, limit 2: %+v; want b and a, the edge between them, truncated", g)
		}

		for _, tc := range []struct{ path, field string }{
			{"/v1/jobs/x/relatives", "id"},
			{fmt.Sprintf("/v1/jobs/%d/relatives?limit=0", a.ID), "limit"},
			{fmt.Sprintf("/v1/jobs/%d/relatives?limit=1001", a.ID), "limit"},
			{fmt.Sprintf("/v1/jobs/%d/relatives?limit=", a.ID), "limit"},
			{fmt.Sprintf("/v1/jobs/%d/relatives?limit=1&limit=2", a.ID), "limit"},
			{fmt.Sprintf("/v1/jobs/%d/relatives?depth=2", a.ID), "depth"},
			{"/v1/jobs/0/flow", "id"},
			{fmt.Sprintf("/v1/jobs/%d/flow?limit=2001", a.ID), "limit"},
			{fmt.Sprintf("/v1/jobs/%d/flow?limit=-1", a.ID), "limit"},
		} {
			e.wantError("GET", tc.path, "", http.StatusBadRequest, CodeInvalidField, tc.field)
		}
		e.wantError("GET", "/v1/jobs/999999/relatives", "", http.StatusNotFound, CodeNotFound, "")
		e.wantError("GET", "/v1/jobs/999999/flow", "", http.StatusNotFound, CodeNotFound, "")
	})
}

// TestClaimParentResults: a claim with parent_results gives each claimed
// child its parents' results by ref (null for one that failed, under
// run_anyway), and jobs without parents nothing; a claim without it
// carries no parent_results at all.
func TestClaimParentResults(t *testing.T) {
	flowStores(t, func(t *testing.T, e *testEnv) {
		jobs := e.enqueueFlow(`{"jobs":[
			{"ref":"extract","kind":"extract","queue":"pr"},
			{"ref":"flaky","kind":"flaky","queue":"pr","max_attempts":1},
			{"kind":"report","queue":"pr","after":[{"ref":"extract"},{"ref":"flaky","policy":"run_anyway"}]}
		]}`, 3)
		parents := e.claim(`{"worker":"w","queues":["pr"],"limit":2,"parent_results":true}`)
		if len(parents) != 2 || parents[0].ParentResults != nil || parents[1].ParentResults != nil {
			t.Fatalf("claim of the two parents: %+v; want two jobs without parent_results", parents)
		}
		for _, p := range parents {
			switch p.ID {
			case jobs[0].ID:
				e.must("POST", fmt.Sprintf("/v1/jobs/%d/complete", p.ID), fmt.Sprintf(`{"token":%q,"result":{"rows":3}}`, p.Token), http.StatusOK, nil)
			case jobs[1].ID:
				e.must("POST", fmt.Sprintf("/v1/jobs/%d/fail", p.ID), fmt.Sprintf(`{"token":%q,"error":"boom"}`, p.Token), http.StatusOK, nil)
			}
		}
		status, body := e.do("POST", "/v1/claim", `{"worker":"w","queues":["pr"],"parent_results":true}`)
		var got struct {
			Jobs []struct {
				ID            int64                      `json:"id"`
				ParentResults map[string]json.RawMessage `json:"parent_results"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(body, &got); status != http.StatusOK || err != nil || len(got.Jobs) != 1 || got.Jobs[0].ID != jobs[2].ID {
			t.Fatalf("claim of the child: %d %s %v", status, body, err)
		}
		if pr, _ := json.Marshal(got.Jobs[0].ParentResults); string(pr) != `{"extract":{"rows":3},"flaky":null}` {
			t.Fatalf("the child's parent_results = %s; want extract's result and null for flaky (body %s)", pr, body)
		}

		// Without the flag: no parent_results key at all.
		e.enqueueFlow(`{"jobs":[{"ref":"p","kind":"p","queue":"pr2"},{"kind":"c","queue":"pr2","after":[{"ref":"p"}]}]}`, 2)
		p := e.claim(`{"worker":"w","queues":["pr2"]}`)[0]
		e.must("POST", fmt.Sprintf("/v1/jobs/%d/complete", p.ID), fmt.Sprintf(`{"token":%q,"result":1}`, p.Token), http.StatusOK, nil)
		_, body = e.do("POST", "/v1/claim", `{"worker":"w","queues":["pr2"]}`)
		var plain struct{ Jobs []map[string]json.RawMessage }
		if err := json.Unmarshal(body, &plain); err != nil || len(plain.Jobs) != 1 {
			t.Fatalf("claim of the second child: %s %v", body, err)
		}
		if _, has := plain.Jobs[0]["parent_results"]; has {
			t.Fatalf("a claim that did not ask carries parent_results: %s", body)
		}
		e.wantError("POST", "/v1/claim", `{"worker":"w","parent_results":"yes"}`, http.StatusBadRequest, CodeInvalidField, "parent_results")
	})
}
