package httpapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/readpast/readpast"
)

// TestTagsSnoozeBulk drives tags, snooze and the bulk actions over HTTP on
// both stores: tags round-trip and filter listings, a snooze puts the job
// back for later and counts up to the server's limit (409 snooze_limit
// past it, the job still running), and the bulk actions report their
// counts, fence the cancelled running jobs' tokens and refuse empty or
// unknown filters.
func TestTagsSnoozeBulk(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, func(c *Config) { c.MaxSnoozes = 2 })
			j := e.enqueue(`{"kind":"k","queue":"q","tags":["a","b","a"]}`)
			if !slices.Equal(j.Tags, []string{"a", "b"}) || j.Snoozes != 0 {
				t.Fatalf("enqueued: tags %q snoozes %d", j.Tags, j.Snoozes)
			}
			other := e.enqueue(`{"kind":"k","queue":"q"}`)
			if other.Tags == nil || len(other.Tags) != 0 {
				t.Fatalf("untagged job: tags %#v", other.Tags)
			}
			e.wantError("POST", "/v1/jobs", `{"kind":"k","tags":["x y"]}`, 400, CodeInvalidField, "tags")
			e.wantError("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","tags":[""]}]}`, 400, CodeInvalidField, "jobs[1].tags")
			e.wantError("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","queue":""}]}`, 400, CodeInvalidField, "jobs[1].queue")
			e.wantError("POST", "/v1/flows", `{"jobs":[{"kind":"k","queue":""}]}`, 400, CodeInvalidField, "jobs[0].queue")
			var list struct{ Jobs []Job }
			e.must("GET", "/v1/jobs?tag=b", ``, 200, &list)
			if len(list.Jobs) != 1 || list.Jobs[0].ID != j.ID {
				t.Fatalf("list by tag: %+v", list.Jobs)
			}
			e.wantError("GET", "/v1/jobs?tag=", ``, 400, CodeInvalidField, "tag")

			// Snooze twice (the limit), then 409 snooze_limit.
			for i := 1; i <= 2; i++ {
				e.must("POST", "/v1/jobs/"+fmt.Sprint(j.ID)+"/retry", ``, 200, nil) // due now
				c := e.claim(`{"worker":"w","queues":["q"],"limit":2}`)
				var held Job
				for _, cj := range c {
					if cj.ID == j.ID {
						held = cj
					} else {
						e.must("POST", fmt.Sprintf("/v1/jobs/%d/release", cj.ID), fmt.Sprintf(`{"token":%q}`, cj.Token), 200, nil)
					}
				}
				if held.ID == 0 {
					t.Fatalf("round %d: job not claimed", i)
				}
				var after Job
				e.must("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), fmt.Sprintf(`{"token":%q,"seconds":600}`, held.Token), 200, &after)
				if after.State != readpast.StatePending || after.Snoozes != i || after.Attempt != 0 {
					t.Fatalf("round %d: after snooze %+v", i, after)
				}
				e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), fmt.Sprintf(`{"token":%q,"seconds":1}`, held.Token), 409, CodeStaleToken, "")
			}
			e.must("POST", "/v1/jobs/"+fmt.Sprint(j.ID)+"/retry", ``, 200, nil)
			var held Job
			for _, cj := range e.claim(`{"worker":"w","queues":["q"],"limit":2}`) {
				if cj.ID == j.ID {
					held = cj
				}
			}
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), fmt.Sprintf(`{"token":%q,"seconds":1}`, held.Token), 409, CodeSnoozeLimit, "")
			// At the limit, a token that is not the current claim's is
			// stale, not over the limit: its caller's claim is over.
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), `{"token":"7f1c7a52-4b8e-4f5e-9a51-2f0d3c8a9b10","seconds":1}`, 409, CodeStaleToken, "")
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), fmt.Sprintf(`{"token":%q,"seconds":1}`, strings.ToUpper(held.Token)), 409, CodeSnoozeLimit, "")
			if g := e.get(j.ID); g.State != readpast.StateRunning || g.Snoozes != 2 {
				t.Fatalf("after snooze_limit: %s, snoozes %d", g.State, g.Snoozes)
			}
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/snooze", j.ID), fmt.Sprintf(`{"token":%q,"seconds":-1}`, held.Token), 400, CodeInvalidField, "seconds")

			// Bulk: cancel the queue (the running job's token is fenced),
			// retry by tag, delete what is finished.
			var br BulkResponse
			e.must("POST", "/v1/bulk/cancel", `{"queue":"q"}`, 200, &br)
			if br.Count != 2 {
				t.Fatalf("bulk cancel: %d", br.Count)
			}
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/complete", j.ID), fmt.Sprintf(`{"token":%q}`, held.Token), 409, CodeStaleToken, "")
			e.must("POST", "/v1/bulk/retry", `{"tag":"a"}`, 200, &br)
			if br.Count != 1 || e.get(j.ID).State != readpast.StatePending {
				t.Fatalf("bulk retry by tag: %d, job %s", br.Count, e.get(j.ID).State)
			}
			e.must("POST", "/v1/bulk/delete", `{"queue":"q"}`, 200, &br)
			if br.Count != 1 {
				t.Fatalf("bulk delete: %d", br.Count)
			}
			e.wantError("GET", fmt.Sprintf("/v1/jobs/%d", other.ID), ``, 404, CodeNotFound, "")
			e.wantError("POST", "/v1/bulk/delete", `{}`, 400, CodeInvalidField, "filter")
			e.wantError("POST", "/v1/bulk/delete", `{"queue":"q","everything":true}`, 400, CodeInvalidField, "everything")
			e.wantError("POST", "/v1/bulk/cancel", `{"state":"failed"}`, 400, CodeInvalidField, "state")
			// A filter given empty is refused, not taken as no filter.
			e.must("POST", "/v1/jobs", `{"kind":"empty-filter","queue":"q2"}`, 201, nil)
			e.wantError("POST", "/v1/bulk/cancel", `{"queue":"","kind":"empty-filter"}`, 400, CodeInvalidField, "queue")
			e.wantError("POST", "/v1/bulk/cancel", `{"queue":"q2","tag":""}`, 400, CodeInvalidField, "tag")
		})
	}
}

// TestCancelWithToken: a cancel that names a claim token (a worker
// cancelling its own job) cancels only while the token is the job's
// current claim, or answers the job as it is when that token cancelled it
// already; any other token is 409 stale_token and changes nothing.
// A cancel without a body still cancels whatever the claim.
func TestCancelWithToken(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, nil)
			j := e.enqueue(`{"kind":"k","queue":"ct"}`)
			c := e.claim(`{"queues":["ct"],"worker":"w","limit":1,"lease_seconds":60}`)
			if len(c) != 1 || c[0].ID != j.ID || c[0].Token == "" {
				t.Fatalf("claim: %+v", c)
			}
			path := "/v1/jobs/" + itoa(j.ID) + "/cancel"
			other := `{"token":"0b0c7d1e-0000-4000-8000-000000000000"}`
			e.wantError("POST", path, other, 409, CodeStaleToken, "")
			e.wantError("POST", path, `{"token":""}`, 400, CodeInvalidField, "token")
			e.wantError("POST", path, `{"token":7}`, 400, CodeInvalidField, "token")
			e.wantError("POST", path, `{"token":"`+c[0].Token+`","why":"x"}`, 400, CodeInvalidField, "why")
			if got := e.get(j.ID); got.State != "running" || got.Attempt != 1 {
				t.Fatalf("after refused cancels the job is %s, attempt %d; want running, attempt 1", got.State, got.Attempt)
			}
			var done Job
			e.must("POST", path, `{"token":"`+c[0].Token+`"}`, 200, &done)
			if done.State != "cancelled" {
				t.Fatalf("cancel with the current token: %+v", done)
			}
			// Sent again (its answer lost): the job as it is.
			var again Job
			e.must("POST", path, `{"token":"`+c[0].Token+`"}`, 200, &again)
			if again.State != "cancelled" || again.FinishedAt == nil || !again.FinishedAt.Equal(*done.FinishedAt) {
				t.Fatalf("cancel repeated with its token: %+v, want the job as the first cancel left it %+v", again, done)
			}
			e.wantError("POST", "/v1/jobs/987654/cancel", `{"token":"`+c[0].Token+`"}`, 404, CodeNotFound, "")

			// Without a token (no body, or a null one) the cancel is the
			// operator's: whatever the claim.
			k := e.enqueue(`{"kind":"k","queue":"ct"}`)
			if c := e.claim(`{"queues":["ct"],"worker":"w","limit":1,"lease_seconds":60}`); len(c) != 1 || c[0].ID != k.ID {
				t.Fatalf("claim: %+v", c)
			}
			e.must("POST", "/v1/jobs/"+itoa(k.ID)+"/cancel", `{"token":null}`, 200, &done)
			if done.State != "cancelled" {
				t.Fatalf("cancel without a token: %+v", done)
			}
		})
	}
}
