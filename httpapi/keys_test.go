package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestEnqueueKeys drives a job's keys over HTTP on both stores: "keys"
// round-trips through every enqueue endpoint (one job, a batch, a flow,
// a batch's finisher and members) and every read of the job (the enqueue
// answer, get, claim, list and its summary), the group is the first key,
// and a bad "keys" (five keys, a repeat, a bad name, a group that is not
// the first key, a wrong type) is a 400 invalid_field naming it that
// stores nothing.
func TestEnqueueKeys(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, nil)
			ab := []string{"a", "b"}
			wantKeys := func(what string, j Job, keys []string) {
				t.Helper()
				if !slices.Equal(j.Keys, keys) {
					t.Errorf("%s: keys %q, want %q", what, j.Keys, keys)
				}
				group := ""
				if j.Group != nil {
					group = *j.Group
				}
				if len(keys) > 0 && group != keys[0] {
					t.Errorf("%s: group %q, want %q (the first key)", what, group, keys[0])
				}
			}

			j := e.enqueue(`{"kind":"k","queue":"kq","keys":["a","b"]}`)
			wantKeys("enqueued", j, ab)
			wantKeys("get", e.get(j.ID), ab)
			both := e.enqueue(`{"kind":"k","queue":"other","group":"a","keys":["a","c"]}`)
			wantKeys("group and keys", e.get(both.ID), []string{"a", "c"})
			one := e.enqueue(`{"kind":"k","queue":"other","group":"g"}`)
			wantKeys("group alone", e.get(one.ID), []string{"g"})
			none := e.enqueue(`{"kind":"k","queue":"other","keys":[]}`)
			if none.Keys != nil || none.Group != nil {
				t.Errorf("no keys: keys %q group %v", none.Keys, none.Group)
			}
			var raw map[string]json.RawMessage
			if e.must("GET", "/v1/jobs/"+itoa(none.ID), "", http.StatusOK, &raw); raw["keys"] != nil {
				t.Errorf("a job without keys carries \"keys\": %s", raw["keys"])
			}

			var batch JobsResponse
			e.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","queue":"other"},{"kind":"k","queue":"other","keys":["x","y","z","w"]}]}`, http.StatusCreated, &batch)
			wantKeys("batch entry", e.get(batch.Jobs[1].ID), []string{"x", "y", "z", "w"})

			var flow JobsResponse
			e.must("POST", "/v1/flows", `{"jobs":[{"ref":"p","kind":"k","queue":"other","keys":["f1","f2"]},{"kind":"k","queue":"other","keys":["f2"],"after":[{"ref":"p"}]}]}`, http.StatusCreated, &flow)
			wantKeys("flow parent", flow.Jobs[0], []string{"f1", "f2"})
			wantKeys("flow child", e.get(flow.Jobs[1].ID), []string{"f2"})

			var bt Batch
			e.must("POST", "/v1/batches", `{"finisher":{"kind":"fin","queue":"other","keys":["b1","b2"]}}`, http.StatusCreated, &bt)
			wantKeys("batch finisher", bt.Finisher, []string{"b1", "b2"})
			var members JobsResponse
			e.must("POST", fmt.Sprintf("/v1/batches/%d/jobs", bt.ID), `{"jobs":[{"kind":"m","queue":"other","keys":["b2","b3"]}]}`, http.StatusCreated, &members)
			wantKeys("batch member", e.get(members.Jobs[0].ID), []string{"b2", "b3"})

			claimed := e.claim(`{"worker":"w","queues":["kq"]}`)
			if len(claimed) != 1 || claimed[0].ID != j.ID {
				t.Fatalf("claim: %+v", claimed)
			}
			wantKeys("claimed", claimed[0], ab)
			var list JobsResponse
			e.must("GET", "/v1/jobs?queue=kq", "", http.StatusOK, &list)
			if len(list.Jobs) != 1 {
				t.Fatalf("list: %+v", list.Jobs)
			}
			wantKeys("listed", list.Jobs[0], ab)
			var summary struct{ Jobs []JobSummary }
			e.must("GET", "/v1/jobs?queue=kq&summary=true", "", http.StatusOK, &summary)
			if len(summary.Jobs) != 1 || !slices.Equal(summary.Jobs[0].Keys, ab) {
				t.Errorf("summary: %+v", summary.Jobs)
			}

			before := e.fingerprint()
			for _, c := range []struct{ path, body, field string }{
				{"/v1/jobs", `{"kind":"k","keys":["a","b","c","d","e"]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":["a","b","a"]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":["a","has space"]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":["a",""]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","group":"b","keys":["a","b"]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":"a"}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":[1]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":{"a":1}}`, "keys"},
				{"/v1/jobs", `{"kind":"k","keys":["a"],"keys":["b"]}`, "keys"},
				{"/v1/jobs", `{"kind":"k","key":["a"]}`, "key"},
				{"/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","keys":["a","b","c","d","e"]}]}`, "jobs[1].keys"},
				{"/v1/flows", `{"jobs":[{"kind":"k","keys":["a","a"]}]}`, "jobs[0].keys"},
				{"/v1/batches", `{"finisher":{"kind":"k","keys":["a","b","c","d","e"]}}`, "finisher.keys"},
				{fmt.Sprintf("/v1/batches/%d/jobs", bt.ID), `{"jobs":[{"kind":"k","keys":["1","2","3","4","5"]}]}`, "jobs[0].keys"},
			} {
				e.wantError("POST", c.path, c.body, http.StatusBadRequest, CodeInvalidField, c.field)
			}
			// A schedule's job has one key, its group.
			e.wantError("PUT", "/v1/schedules/s", `{"cron":"@every 1h","job":{"kind":"k","keys":["a","b"]}}`, http.StatusBadRequest, CodeInvalidField, "job.keys")
			if after := e.fingerprint(); after != before {
				t.Errorf("a refused enqueue changed the jobs:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestParseEnqueueKeys: ParseEnqueue (the readpast command's check of
// enqueue lines) reads keys as the server does.
func TestParseEnqueueKeys(t *testing.T) {
	p, err := ParseEnqueue([]byte(`{"kind":"k","keys":["a","b"]}`), time.Now())
	if err != nil || !slices.Equal(p.Keys, []string{"a", "b"}) || p.Group != "a" {
		t.Fatalf("ParseEnqueue: %+v, %v", p, err)
	}
	_, err = ParseEnqueue([]byte(`{"kind":"k","keys":["a","b","c","d","e"]}`), time.Now())
	var ae *apiError
	if !errors.As(err, &ae) || ae.Field != "keys" || ae.Code != CodeInvalidField {
		t.Fatalf("five keys: %v", err)
	}
}
