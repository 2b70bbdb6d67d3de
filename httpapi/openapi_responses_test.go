package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// openAPIResponses validates real responses against the schemas of the
// OpenAPI document, and records which documented operations and statuses
// a test exercised.
type openAPIResponses struct {
	t       *testing.T
	doc     map[string]any
	comp    *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema
	covered map[string]bool // "GET /v1/jobs/{id} 404"
}

func newOpenAPIResponses(t *testing.T) *openAPIResponses {
	t.Helper()
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time and the like are checked, not only annotations
	if err := c.AddResource("openapi.json", raw); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	return &openAPIResponses{t: t, doc: doc, comp: c, schemas: map[string]*jsonschema.Schema{}, covered: map[string]bool{}}
}

// pointer escapes a JSON pointer token.
func pointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// schemaFor compiles the JSON schema of one documented response: the
// response object at paths/{path}/{method}/responses/{status} (or one it
// refers to with $ref), content application/json.
func (o *openAPIResponses) schemaFor(method, path string, status int) (*jsonschema.Schema, error) {
	key := fmt.Sprintf("%s %s %d", method, path, status)
	if s, ok := o.schemas[key]; ok {
		return s, nil
	}
	ops, _ := o.doc["paths"].(map[string]any)[path].(map[string]any)
	op, _ := ops[strings.ToLower(method)].(map[string]any)
	if op == nil {
		return nil, fmt.Errorf("%s %s is not in the document", method, path)
	}
	responses, _ := op["responses"].(map[string]any)
	code := fmt.Sprint(status)
	resp, ok := responses[code].(map[string]any)
	loc := "#/paths/" + pointer(path) + "/" + strings.ToLower(method) + "/responses/" + code
	if !ok {
		return nil, fmt.Errorf("%s %s: status %d is not documented", method, path, status)
	}
	if ref, ok := resp["$ref"].(string); ok {
		loc = ref
		name := strings.TrimPrefix(ref, "#/components/responses/")
		resp, _ = o.doc["components"].(map[string]any)["responses"].(map[string]any)[name].(map[string]any)
		if resp == nil {
			return nil, fmt.Errorf("%s %s %d: unresolved %s", method, path, status, ref)
		}
	}
	content, _ := resp["content"].(map[string]any)
	if _, ok := content["application/json"]; !ok {
		return nil, fmt.Errorf("%s %s %d: no application/json content documented", method, path, status)
	}
	s, err := o.comp.Compile("openapi.json" + loc + "/content/application~1json/schema")
	if err != nil {
		return nil, err
	}
	o.schemas[key] = s
	return s, nil
}

// check validates one response of the operation method+path (the
// document's path template) against its documented schema.
func (o *openAPIResponses) check(method, path string, status int, body []byte) {
	o.t.Helper()
	o.covered[fmt.Sprintf("%s %s %d", method, path, status)] = true
	if status == http.StatusNoContent {
		if len(body) != 0 {
			o.t.Errorf("%s %s %d: a body where none is documented: %s", method, path, status, trunc(string(body)))
		}
		return
	}
	s, err := o.schemaFor(method, path, status)
	if err != nil {
		o.t.Errorf("%v (body %s)", err, trunc(string(body)))
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		o.t.Errorf("%s %s %d: the body is not JSON: %v", method, path, status, err)
		return
	}
	if err := s.Validate(inst); err != nil {
		o.t.Errorf("%s %s %d: the response does not match the document:\n%v\nbody: %s", method, path, status, err, trunc(string(body)))
	}
}

// TestResponsesMatchOpenAPI drives every documented JSON operation of the
// API with real requests, successful and failing, and validates each
// response body against the schema the OpenAPI document gives for its
// status. Every documented operation and status the server can produce
// here must be exercised, so a new endpoint cannot go unchecked.
func TestResponsesMatchOpenAPI(t *testing.T) {
	o := newOpenAPIResponses(t)
	e := newEnv(t, nil)
	do := func(method, template, path, body string, want int) []byte {
		t.Helper()
		status, b := e.do(method, path, body)
		if status != want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, trunc(string(b)))
		}
		o.check(method, template, status, b)
		return b
	}
	var job Job
	if err := json.Unmarshal(do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"k","payload":{"a":1},"group":"g","priority":-1}`, 201), &job); err != nil {
		t.Fatal(err)
	}
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":""}`, 400)
	for _, body := range []string{`{"kind":"idem"}`, `{"kind":"idem","priority":3}`} {
		status, b := e.request(context.Background(), "POST", "/v1/jobs", body, "", "",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "once"})
		if status != 201 && status != 422 {
			t.Fatalf("POST /v1/jobs with Idempotency-Key: %d %s", status, b)
		}
		o.check("POST", "/v1/jobs", status, b)
	}
	do("POST", "/v1/jobs/batch", "/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b","run_at":"2030-01-01T00:00:00Z"}]}`, 201)
	do("POST", "/v1/jobs/batch", "/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b","priority":5000}]}`, 400)
	do("POST", "/v1/flows", "/v1/flows", `{"jobs":[{"ref":"f","kind":"fa","queue":"flow"},{"kind":"fb","queue":"flow","after":[{"ref":"f","policy":"hold_child"}]}]}`, 201)
	do("POST", "/v1/flows", "/v1/flows", `{"jobs":[{"kind":"fb","after":[{"ref":"nope"}]}]}`, 400)
	do("POST", "/v1/flows", "/v1/flows", `{"jobs":[{"kind":"fb","after":[{"job_id":999999}]}]}`, 404)
	claimed := do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","limit":2,"lease_seconds":60}`, 200)
	do("POST", "/v1/claim", "/v1/claim", `{"worker":""}`, 400)
	var c struct{ Jobs []Job }
	if err := json.Unmarshal(claimed, &c); err != nil || len(c.Jobs) != 2 {
		t.Fatalf("claim: %s", claimed)
	}
	a, b := c.Jobs[0], c.Jobs[1]
	id := func(j Job, op string) string { return fmt.Sprintf("/v1/jobs/%d/%s", j.ID, op) }
	tok := func(j Job) string { return fmt.Sprintf(`{"token":%q`, j.Token) }
	do("POST", "/v1/jobs/{id}/heartbeat", id(a, "heartbeat"), tok(a)+`,"lease_seconds":30}`, 200)
	do("POST", "/v1/jobs/{id}/heartbeat", id(a, "heartbeat"), `{"token":"00000000-0000-0000-0000-000000000000","lease_seconds":30}`, 409)
	do("POST", "/v1/jobs/{id}/complete", id(a, "complete"), tok(a)+`,"result":{"ok":true}}`, 200)
	do("POST", "/v1/flows", "/v1/flows", fmt.Sprintf(`{"jobs":[{"kind":"fb","after":[{"job_id":%d}]}]}`, a.ID), 409)
	do("POST", "/v1/jobs/{id}/complete", "/v1/jobs/999999/complete", tok(a)+`}`, 404)
	do("POST", "/v1/jobs/{id}/complete", id(a, "complete"), `{"token":"00000000-0000-0000-0000-000000000000"}`, 409)
	do("POST", "/v1/jobs/complete", "/v1/jobs/complete", fmt.Sprintf(`{"jobs":[{"id":%d,"token":%q},{"id":999999,"token":%q}]}`, a.ID, a.Token, a.Token), 200)
	do("POST", "/v1/jobs/complete", "/v1/jobs/complete", `{"jobs":[]}`, 400)
	do("POST", "/v1/jobs/{id}/fail", id(b, "fail"), tok(b)+`,"error":"boom","retry_at":"2030-01-01T00:00:00Z"}`, 200)
	do("POST", "/v1/jobs/{id}/fail", id(b, "fail"), tok(b)+`,"error":"again"}`, 409)
	do("POST", "/v1/jobs/{id}/release", id(b, "release"), tok(b)+`}`, 409)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"k2"}`, 201)
	again := do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","limit":1,"lease_seconds":60}`, 200)
	if err := json.Unmarshal(again, &c); err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim: %s", again)
	}
	do("POST", "/v1/jobs/{id}/release", id(c.Jobs[0], "release"), tok(c.Jobs[0])+`}`, 200)
	do("POST", "/v1/jobs/{id}/cancel", id(c.Jobs[0], "cancel"), ``, 200)
	do("POST", "/v1/jobs/{id}/cancel", id(c.Jobs[0], "cancel"), ``, 409)
	do("POST", "/v1/jobs/{id}/retry", id(c.Jobs[0], "retry"), ``, 200)
	do("POST", "/v1/jobs/{id}/retry", id(a, "retry"), ``, 409)
	do("POST", "/v1/jobs/{id}/retry", "/v1/jobs/999999/retry", ``, 404)
	do("POST", "/v1/jobs/{id}/run", id(c.Jobs[0], "run"), ``, 200)
	do("POST", "/v1/jobs/{id}/run", id(a, "run"), ``, 409)
	do("POST", "/v1/jobs/{id}/run", "/v1/jobs/999999/run", `{}`, 404)
	do("GET", "/v1/jobs/{id}", fmt.Sprintf("/v1/jobs/%d", job.ID), ``, 200)
	do("GET", "/v1/jobs/{id}", "/v1/jobs/999999", ``, 404)
	do("GET", "/v1/jobs/{id}", "/v1/jobs/x", ``, 400)
	do("GET", "/v1/jobs", "/v1/jobs?limit=2", ``, 200)
	do("GET", "/v1/jobs", "/v1/jobs?summary=true&state=succeeded", ``, 200)
	do("GET", "/v1/jobs", "/v1/jobs?state=nope", ``, 400)
	do("POST", "/v1/queues/{name}/pause", "/v1/queues/default/pause", ``, 200)
	do("POST", "/v1/queues/{name}/pause", "/v1/queues/idle/pause", `{}`, 200)
	do("POST", "/v1/queues/{name}/pause", "/v1/queues/x/pause", `{"a":1}`, 400)
	do("GET", "/v1/queues", "/v1/queues", ``, 200)
	do("GET", "/v1/stats", "/v1/stats", ``, 200)
	do("GET", "/v1", "/v1", ``, 200)
	do("POST", "/v1/queues/{name}/resume", "/v1/queues/idle/resume", ``, 200)
	do("POST", "/v1/queues/{name}/resume", "/v1/queues/%20/resume", ``, 400)
	// Unique keys and schedules.
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"u","unique_key":"k1"}`, 201)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"u","unique_key":"k1"}`, 200)
	do("POST", "/v1/jobs/batch", "/v1/jobs/batch", `{"jobs":[{"kind":"u","unique_key":"k1"}]}`, 200)
	do("PUT", "/v1/schedules/{name}", "/v1/schedules/nightly", `{"cron":"0 3 * * *","job":{"kind":"report"}}`, 201)
	do("PUT", "/v1/schedules/{name}", "/v1/schedules/nightly", `{"cron":"@every 1h","job":{"kind":"report"}}`, 200)
	do("PUT", "/v1/schedules/{name}", "/v1/schedules/bad", `{"cron":"nope","job":{"kind":"report"}}`, 400)
	do("GET", "/v1/schedules", "/v1/schedules", ``, 200)
	do("GET", "/v1/schedules/{name}", "/v1/schedules/nightly", ``, 200)
	do("GET", "/v1/schedules/{name}", "/v1/schedules/none", ``, 404)
	do("POST", "/v1/schedules/{name}/pause", "/v1/schedules/nightly/pause", ``, 200)
	do("POST", "/v1/schedules/{name}/resume", "/v1/schedules/nightly/resume", ``, 200)
	do("POST", "/v1/schedules/{name}/run", "/v1/schedules/nightly/run", ``, 201)
	do("POST", "/v1/schedules/{name}/run", "/v1/schedules/none/run", `{}`, 404)
	do("DELETE", "/v1/schedules/{name}", "/v1/schedules/nightly", ``, 204)
	// Limits per key.
	do("PUT", "/v1/limits/{key}", "/v1/limits/customer:*", `{"concurrency":5,"rate":10,"per_seconds":1,"burst":20}`, 201)
	do("PUT", "/v1/limits/{key}", "/v1/limits/customer:*", `{"concurrency":2}`, 200)
	do("PUT", "/v1/limits/{key}", "/v1/limits/api:x", `{"rate":1,"per_seconds":3600}`, 201)
	do("PUT", "/v1/limits/{key}", "/v1/limits/bad", `{"concurrency":-1}`, 400)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"sync","queue":"lim","group":"customer:42"}`, 201)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"sync","queue":"lim","keys":["customer:43","api:x"]}`, 201)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"sync","keys":["a","b","c","d","e"]}`, 400)
	do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","queues":["lim"]}`, 200)
	do("GET", "/v1/limits", "/v1/limits", ``, 200)
	do("GET", "/v1/limits/{key}", "/v1/limits/customer:*", ``, 200)
	do("GET", "/v1/limits/{key}", "/v1/limits/none", ``, 404)
	do("GET", "/v1/limits/{key}", "/v1/limits/a*b", ``, 400)
	do("POST", "/v1/limits/{key}/tokens", "/v1/limits/api:x/tokens", `{"n":1}`, 200)
	do("POST", "/v1/limits/{key}/tokens", "/v1/limits/api:x/tokens", ``, 200)
	do("POST", "/v1/limits/{key}/tokens", "/v1/limits/api:x/tokens", `{"n":0}`, 400)
	do("DELETE", "/v1/limits/{key}", "/v1/limits/api:x", ``, 204)
	do("DELETE", "/v1/limits/{key}", "/v1/limits/api:x", ``, 404)
	// Tags, snooze and bulk actions.
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"t","queue":"ctl","tags":["blue","big"]}`, 201)
	do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"t","tags":["has space"]}`, 400)
	do("GET", "/v1/jobs", "/v1/jobs?tag=blue", ``, 200)
	do("GET", "/v1/jobs", "/v1/jobs?tag=blue&summary=true", ``, 200)
	sn := do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","queues":["ctl"],"limit":1}`, 200)
	if err := json.Unmarshal(sn, &c); err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim: %s", sn)
	}
	s0 := c.Jobs[0]
	do("POST", "/v1/jobs/{id}/snooze", id(s0, "snooze"), tok(s0)+`,"seconds":3600}`, 200)
	do("POST", "/v1/jobs/{id}/snooze", id(s0, "snooze"), tok(s0)+`,"seconds":3600}`, 409)
	do("POST", "/v1/jobs/{id}/snooze", id(s0, "snooze"), tok(s0)+`}`, 400)
	do("POST", "/v1/jobs/{id}/snooze", "/v1/jobs/999999/snooze", tok(s0)+`,"seconds":1}`, 404)
	do("POST", "/v1/bulk/cancel", "/v1/bulk/cancel", `{"queue":"ctl","tag":"blue"}`, 200)
	do("POST", "/v1/bulk/cancel", "/v1/bulk/cancel", `{}`, 400)
	do("POST", "/v1/bulk/retry", "/v1/bulk/retry", `{"tag":"blue","state":"cancelled"}`, 200)
	do("POST", "/v1/bulk/retry", "/v1/bulk/retry", `{"queue":"ctl","nope":1}`, 400)
	do("POST", "/v1/bulk/cancel", "/v1/bulk/cancel", `{"kind":"t"}`, 200)
	do("DELETE", "/v1/jobs/{id}", fmt.Sprintf("/v1/jobs/%d", a.ID), ``, 204)
	do("DELETE", "/v1/jobs/{id}", fmt.Sprintf("/v1/jobs/%d", a.ID), ``, 404)
	var live Job
	if err := json.Unmarshal(do("POST", "/v1/jobs", "/v1/jobs", `{"kind":"live"}`, 201), &live); err != nil {
		t.Fatal(err)
	}
	do("DELETE", "/v1/jobs/{id}", fmt.Sprintf("/v1/jobs/%d", live.ID), ``, 409)
	do("DELETE", "/v1/jobs/{id}", "/v1/jobs/0", ``, 400)
	do("POST", "/v1/bulk/delete", "/v1/bulk/delete", `{"queue":"ctl","state":"cancelled"}`, 200)
	do("POST", "/v1/bulk/delete", "/v1/bulk/delete", `{"state":"running"}`, 400)
	// Flow inspection, and a claim that asks for parent results.
	var fl JobsResponse
	if err := json.Unmarshal(do("POST", "/v1/flows", "/v1/flows", `{"jobs":[{"ref":"p","kind":"fa","queue":"insp"},{"kind":"fb","queue":"insp","after":[{"ref":"p"}]}]}`, 201), &fl); err != nil {
		t.Fatal(err)
	}
	do("GET", "/v1/jobs/{id}/relatives", fmt.Sprintf("/v1/jobs/%d/relatives", fl.Jobs[1].ID), ``, 200)
	do("GET", "/v1/jobs/{id}/relatives", fmt.Sprintf("/v1/jobs/%d/relatives?limit=0", fl.Jobs[1].ID), ``, 400)
	do("GET", "/v1/jobs/{id}/relatives", "/v1/jobs/999999/relatives", ``, 404)
	do("GET", "/v1/jobs/{id}/flow", fmt.Sprintf("/v1/jobs/%d/flow?limit=1", fl.Jobs[0].ID), ``, 200)
	do("GET", "/v1/jobs/{id}/flow", fmt.Sprintf("/v1/jobs/%d/flow?depth=1", fl.Jobs[0].ID), ``, 400)
	do("GET", "/v1/jobs/{id}/flow", "/v1/jobs/999999/flow", ``, 404)
	pc := do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","queues":["insp"],"parent_results":true}`, 200)
	if err := json.Unmarshal(pc, &c); err != nil || len(c.Jobs) != 1 {
		t.Fatalf("claim: %s", pc)
	}
	do("POST", "/v1/jobs/{id}/complete", id(c.Jobs[0], "complete"), tok(c.Jobs[0])+`,"result":{"n":1}}`, 200)
	do("POST", "/v1/claim", "/v1/claim", `{"worker":"w","queues":["insp"],"parent_results":true}`, 200)
	do("GET", "/v1/jobs/{id}/relatives", fmt.Sprintf("/v1/jobs/%d/relatives", fl.Jobs[1].ID), ``, 200)
	// Batches.
	var bt Batch
	if err := json.Unmarshal(do("POST", "/v1/batches", "/v1/batches", `{"finisher":{"kind":"fin","queue":"bt"}}`, 201), &bt); err != nil {
		t.Fatal(err)
	}
	do("POST", "/v1/batches", "/v1/batches", `{"finisher":{"kind":"fin","unique_key":"u"}}`, 400)
	bpath := fmt.Sprintf("/v1/batches/%d", bt.ID)
	do("POST", "/v1/batches/{id}/jobs", bpath+"/jobs", `{"jobs":[{"kind":"m","queue":"bt"}]}`, 201)
	do("POST", "/v1/batches/{id}/jobs", bpath+"/jobs", `{"jobs":[]}`, 400)
	do("POST", "/v1/batches/{id}/jobs", "/v1/batches/999999/jobs", `{"jobs":[{"kind":"m"}]}`, 404)
	do("GET", "/v1/batches/{id}", bpath, ``, 200)
	do("GET", "/v1/batches/{id}", "/v1/batches/999999", ``, 404)
	do("POST", "/v1/batches/{id}/seal", bpath+"/seal", ``, 200)
	do("POST", "/v1/batches/{id}/seal", "/v1/batches/999999/seal", `{}`, 404)
	do("POST", "/v1/batches/{id}/jobs", bpath+"/jobs", `{"jobs":[{"kind":"m","queue":"bt"}]}`, 409)
	do("GET", "/healthz", "/healthz", ``, 200)
	do("GET", "/readyz", "/readyz", ``, 200)
	do("GET", "/v1/openapi.json", "/v1/openapi.json", ``, 200)

	// With tokens: 401 without one, 403 for a read-only token's write.
	ea := newEnv(t, func(c *Config) {
		c.Tokens = []string{"full-0123456789abcdef"}
		c.ReadTokens = []string{"ro-0123456789abcdef"}
	})
	for _, tc := range []struct {
		method, template, path, token string
		want                          int
	}{
		{"GET", "/v1/stats", "/v1/stats", "", 401},
		{"POST", "/v1/jobs", "/v1/jobs", "ro-0123456789abcdef", 403},
	} {
		status, body := ea.request(t.Context(), tc.method, tc.path, `{"kind":"k"}`, tc.token, "", nil)
		if status != tc.want {
			t.Fatalf("%s %s with token %q: %d, want %d", tc.method, tc.path, tc.token, status, tc.want)
		}
		o.check(tc.method, tc.template, status, body)
	}
	// A body over the limit.
	es := newEnv(t, func(c *Config) { c.MaxBodyBytes = 64 })
	status, body := es.do("POST", "/v1/jobs", `{"kind":"k","payload":"`+strings.Repeat("x", 100)+`"}`)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %d", status)
	}
	o.check("POST", "/v1/jobs", status, body)

	// Every documented JSON operation was exercised with its success status.
	var missing []string
	for path, ops := range o.doc["paths"].(map[string]any) {
		for method, op := range ops.(map[string]any) {
			if method == "parameters" {
				continue // shared by the path's operations
			}
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for code, r := range responses {
				if !strings.HasPrefix(code, "2") {
					continue
				}
				if content, _ := r.(map[string]any)["content"].(map[string]any); content["application/json"] == nil {
					continue // /metrics is text
				}
				if k := strings.ToUpper(method) + " " + path + " " + code; !o.covered[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented operations this test does not exercise: %v", missing)
	}
}
