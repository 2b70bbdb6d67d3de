package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/readpast/readpast"
)

// TestCompleteBatch drives POST /v1/jobs/complete on both stores: the
// jobs with their current token succeed (with their results stored), a
// stale token and an unknown id are reported per item and change nothing,
// a completion repeated with its token succeeds again, and the completed
// counter counts each job once under its queue and kind, whether its
// claim went through this server or not.
func TestCompleteBatch(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, nil)
			for range 3 {
				e.enqueue(`{"kind":"bk","queue":"bq"}`)
			}
			c := e.claim(`{"worker":"w","queues":["bq"],"limit":3,"lease_seconds":60}`)
			if len(c) != 3 {
				t.Fatalf("claimed %d jobs, want 3", len(c))
			}
			// A fourth job claimed by the store directly, not through the
			// server: its labels come from the store.
			e.enqueue(`{"kind":"direct","queue":"bq"}`)
			direct, err := e.store.Claim(t.Context(), readpast.ClaimParams{Queues: []string{"bq"}, Worker: "d", Limit: 1, Lease: 60e9})
			if err != nil || len(direct) != 1 {
				t.Fatalf("store claim: %v, %d jobs", err, len(direct))
			}
			stale := strings.Repeat("0", 32)
			body := fmt.Sprintf(`{"jobs":[
				{"id":%d,"token":%q,"result":{"n":1}},
				{"id":%d,"token":%q},
				{"id":%d,"token":%q},
				{"id":999999,"token":%q},
				{"id":%d,"token":%q}]}`,
				c[0].ID, c[0].Token, c[1].ID, stale, c[2].ID, c[2].Token, c[2].Token, direct[0].ID, direct[0].Token)
			var out CompleteBatchResponse
			e.must("POST", "/v1/jobs/complete", body, 200, &out)
			want := []struct {
				ok   bool
				code string
			}{{true, ""}, {false, CodeStaleToken}, {true, ""}, {false, CodeNotFound}, {true, ""}}
			if len(out.Results) != len(want) {
				t.Fatalf("%d results, want %d: %+v", len(out.Results), len(want), out.Results)
			}
			for i, w := range want {
				r := out.Results[i]
				code := ""
				if r.Error != nil {
					code = r.Error.Code
				}
				if r.OK != w.ok || code != w.code {
					t.Errorf("result %d: %+v; want ok %v code %q", i, r, w.ok, w.code)
				}
			}
			if j := e.get(c[0].ID); j.State != readpast.StateSucceeded || string(j.Result) != `{"n":1}` {
				t.Errorf("job 0: %s, result %s; want succeeded with its result", j.State, j.Result)
			}
			if j := e.get(c[1].ID); j.State != readpast.StateRunning {
				t.Errorf("the stale completion changed job 1: %s", j.State)
			}
			// Again with the token that completed it: still fine, and not
			// counted twice.
			e.must("POST", "/v1/jobs/complete", fmt.Sprintf(`{"jobs":[{"id":%d,"token":%q}]}`, c[0].ID, c[0].Token), 200, &out)
			if len(out.Results) != 1 || !out.Results[0].OK {
				t.Errorf("repeated completion: %+v", out.Results)
			}
			raw := string(e.must("GET", "/metrics", "", 200, nil))
			for _, line := range []string{
				`readpast_jobs_completed_total{kind="bk",queue="bq"} 3`,
				`readpast_jobs_completed_total{kind="direct",queue="bq"} 1`,
			} {
				if !strings.Contains(raw, line) {
					t.Errorf("metrics lack %s", line)
				}
			}
		})
	}
}

// TestCompleteBatchBadInput: a malformed batch is refused whole, naming
// the item and field at fault, and completes nothing.
func TestCompleteBatchBadInput(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatch = 2 })
	e.enqueue(`{"kind":"k","queue":"q"}`)
	c := e.claim(`{"worker":"w","queues":["q"],"lease_seconds":60}`)
	ok := fmt.Sprintf(`{"id":%d,"token":%q}`, c[0].ID, c[0].Token)
	for _, tc := range []struct {
		body        string
		status      int
		code, field string
	}{
		{`{"jobs":[]}`, 400, CodeInvalidField, "jobs"},
		{`{}`, 400, CodeInvalidField, "jobs"},
		{`[]`, 400, CodeMalformedJSON, ""},
		{`{"jobs":[` + ok + `,` + ok + `,` + ok + `]}`, 413, CodeBatchTooLarge, "jobs"},
		{`{"jobs":[` + ok + `,{"id":1}]}`, 400, CodeInvalidField, "jobs[1].token"},
		{`{"jobs":[` + ok + `,{"id":0,"token":"t"}]}`, 400, CodeInvalidField, "jobs[1].id"},
		{`{"jobs":[` + ok + `,{"id":"1","token":"t"}]}`, 400, CodeInvalidField, "jobs[1].id"},
		{`{"jobs":[{"id":1,"token":"t","extra":1}]}`, 400, CodeInvalidField, "jobs[0].extra"},
		{`{"jobs":[` + ok + `,{"id":1,"token":"t","result":{"a":}}]}`, 400, CodeMalformedJSON, ""},
		{`{"jobs":[3]}`, 400, CodeInvalidField, "jobs[0]"},
	} {
		e.wantError("POST", "/v1/jobs/complete", tc.body, tc.status, tc.code, tc.field)
	}
	if j := e.get(c[0].ID); j.State != readpast.StateRunning {
		t.Fatalf("a refused batch completed the job: %s", j.State)
	}
}
