package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestRunNowJob drives POST /v1/jobs/{id}/run on both stores: a scheduled
// job becomes due now and is claimed at once, a due job comes back
// unchanged, a job in any other state is 409 invalid_state and left as it
// was (a cancelled or failed job is not revived), an unknown id is 404
// and a body with fields 400.
func TestRunNowJob(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, nil)
			later := e.enqueue(fmt.Sprintf(`{"kind":"k","queue":"q","run_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)))
			if c := e.claim(`{"worker":"w","queues":["q"]}`); len(c) != 0 {
				t.Fatalf("claimed %d jobs before the run-at", len(c))
			}
			var j Job
			e.must("POST", fmt.Sprintf("/v1/jobs/%d/run", later.ID), ``, 200, &j)
			if j.ID != later.ID || j.State != readpast.StatePending || time.Until(j.RunAt) > time.Second || time.Since(j.RunAt) > time.Minute {
				t.Fatalf("run: %+v; want the job pending, due now", j)
			}
			c := e.claim(`{"worker":"w","queues":["q"],"lease_seconds":60}`)
			if len(c) != 1 || c[0].ID != later.ID {
				t.Fatalf("after run claimed %+v, want job %d", c, later.ID)
			}

			// A due job: unchanged, whatever the body's emptiness.
			due := e.enqueue(fmt.Sprintf(`{"kind":"k","queue":"d","run_at":%q}`, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)))
			e.must("POST", fmt.Sprintf("/v1/jobs/%d/run", due.ID), `{}`, 200, &j)
			if !j.RunAt.Equal(due.RunAt) || j.State != readpast.StatePending {
				t.Fatalf("run of a due job: run-at %v, state %s; want %v, pending", j.RunAt, j.State, due.RunAt)
			}

			// Running, then cancelled: refused, and left as it was.
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/run", c[0].ID), ``, 409, CodeInvalidState, "")
			if got := e.get(c[0].ID); got.State != readpast.StateRunning || got.Attempt != 1 {
				t.Fatalf("a refused run changed the running job: %+v", got)
			}
			e.must("POST", fmt.Sprintf("/v1/jobs/%d/cancel", due.ID), ``, 200, nil)
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/run", due.ID), ``, 409, CodeInvalidState, "")
			if got := e.get(due.ID); got.State != readpast.StateCancelled {
				t.Fatalf("a run of a cancelled job made it %s", got.State)
			}
			e.wantError("POST", "/v1/jobs/999999/run", ``, 404, CodeNotFound, "")
			e.wantError("POST", "/v1/jobs/x/run", ``, 400, CodeInvalidField, "id")
			e.wantError("POST", fmt.Sprintf("/v1/jobs/%d/run", later.ID), `{"at":"now"}`, 400, CodeInvalidField, "at")
		})
	}
}

// TestRunNowSchedule drives POST /v1/schedules/{name}/run on both stores:
// 201 with a job made from the schedule's job, due now, for a running or
// a paused schedule, which keeps its next and last tick and its runs;
// 404 for an unknown schedule.
func TestRunNowSchedule(t *testing.T) {
	for name, newE := range map[string]func(*testing.T, func(*Config)) *testEnv{"sqlite": newEnv, "postgres": newPostgresEnv} {
		t.Run(name, func(t *testing.T) {
			e := newE(t, nil)
			var before Schedule
			e.must("PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","time_zone":"Europe/Paris",
				"job":{"kind":"report","queue":"reports","payload":{"team":7},"priority":2,"group":"rep","max_attempts":3}}`, 201, &before)
			var j Job
			e.must("POST", "/v1/schedules/nightly/run", ``, 201, &j)
			if j.Kind != "report" || j.Queue != "reports" || string(j.Payload) != `{"team":7}` || j.Priority != 2 ||
				j.Group == nil || *j.Group != "rep" || j.MaxAttempts != 3 || j.State != readpast.StatePending ||
				time.Until(j.RunAt) > time.Second || time.Since(j.RunAt) > time.Minute {
				t.Fatalf("run made %+v; want the schedule's job, due now", j)
			}
			var after Schedule
			e.must("GET", "/v1/schedules/nightly", ``, 200, &after)
			if after.NextRunAt == nil || !after.NextRunAt.Equal(*before.NextRunAt) || after.LastRunAt != nil || after.LastJobID != nil || len(after.Runs) != 0 {
				t.Fatalf("after a run the schedule is %+v; want it as it was, %+v", after, before)
			}
			if c := e.claim(`{"worker":"w","queues":["reports"]}`); len(c) != 1 || c[0].ID != j.ID {
				t.Fatalf("claimed %+v, want the job made, %d", c, j.ID)
			}

			e.must("POST", "/v1/schedules/nightly/pause", ``, 200, nil)
			var again Job
			e.must("POST", "/v1/schedules/nightly/run", `{}`, 201, &again)
			if again.ID == j.ID || again.Kind != "report" {
				t.Fatalf("run of a paused schedule made %+v", again)
			}
			e.must("GET", "/v1/schedules/nightly", ``, 200, &after)
			if !after.Paused || after.NextRunAt != nil {
				t.Fatalf("a run changed the paused schedule: %+v", after)
			}
			e.wantError("POST", "/v1/schedules/none/run", ``, 404, CodeNotFound, "")
			e.wantError("POST", "/v1/schedules/nightly/run", `{"when":"now"}`, 400, CodeInvalidField, "when")
		})
	}
}

// TestRunNowNeedsFullAccess: both runs are writes: 401 without a token,
// 403 with a read token, and nothing is done.
func TestRunNowNeedsFullAccess(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Tokens = []string{"full-0123456789abcdef"}
		c.ReadTokens = []string{"read-0123456789abcdef"}
	})
	e.token = "full-0123456789abcdef"
	later := e.enqueue(fmt.Sprintf(`{"kind":"k","run_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)))
	e.must("PUT", "/v1/schedules/nightly", `{"cron":"0 3 * * *","job":{"kind":"report"}}`, 201, nil)
	total := e.total()
	for _, path := range []string{fmt.Sprintf("/v1/jobs/%d/run", later.ID), "/v1/schedules/nightly/run"} {
		for token, want := range map[string]int{"": 401, "read-0123456789abcdef": 403} {
			status, body := e.doCtx(t.Context(), "POST", path, ``, token)
			if status != want {
				t.Errorf("POST %s with token %q: %d %s, want %d", path, token, status, body, want)
			}
		}
	}
	if got := e.get(later.ID); !got.RunAt.Equal(later.RunAt) || e.total() != total {
		t.Fatalf("a refused run changed something: run-at %v (was %v), %d jobs (were %d)", got.RunAt, later.RunAt, e.total(), total)
	}
}
