package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// fireDue runs one scheduler pass on e's store, as readpast serve does.
func fireDue(ctx context.Context, e *testEnv) (int, error) {
	return readpast.NewScheduler(e.store, readpast.SchedulerConfig{}).Tick(ctx)
}

func TestEnqueueUniqueKey(t *testing.T) {
	e := newEnv(t, nil)
	var first, again Job
	e.must("POST", "/v1/jobs", `{"kind":"k","unique_key":"order-1"}`, 201, &first)
	if first.UniqueKey != "order-1" || first.Duplicate {
		t.Fatalf("first: %+v", first)
	}
	body := e.must("POST", "/v1/jobs", `{"kind":"k","unique_key":"order-1","payload":{"x":1}}`, 200, &again)
	if !again.Duplicate || again.ID != first.ID || !strings.Contains(string(body), `"duplicate":true`) {
		t.Fatalf("again: %s", body)
	}
	// With a period, a finished holder keeps answering.
	var p Job
	e.must("POST", "/v1/jobs", `{"kind":"k","unique_key":"p","unique_for_seconds":3600}`, 201, &p)
	if p.UniqueUntil == nil || p.UniqueUntil.Sub(p.CreatedAt) != time.Hour {
		t.Fatalf("unique_until %v, created %v", p.UniqueUntil, p.CreatedAt)
	}
	e.must("POST", "/v1/jobs/"+itoa(p.ID)+"/cancel", "", 200, nil)
	var d Job
	e.must("POST", "/v1/jobs", `{"kind":"k","unique_key":"p"}`, 200, &d)
	if !d.Duplicate || d.ID != p.ID || d.State != "cancelled" {
		t.Fatalf("after cancel: %+v", d)
	}
	// A batch settles each entry; 200 only when nothing was created.
	var b JobsResponse
	e.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","unique_key":"order-1"},{"kind":"k","unique_key":"n"},{"kind":"k","unique_key":"n"}]}`, 201, &b)
	if !b.Jobs[0].Duplicate || b.Jobs[0].ID != first.ID || b.Jobs[1].Duplicate || !b.Jobs[2].Duplicate || b.Jobs[2].ID != b.Jobs[1].ID {
		t.Fatalf("batch: %+v", b.Jobs)
	}
	e.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k","unique_key":"order-1"},{"kind":"k","unique_key":"n"}]}`, 200, &b)
	// Bad keys name their field.
	e.wantError("POST", "/v1/jobs", `{"kind":"k","unique_key":""}`, 400, CodeInvalidField, "unique_key")
	e.wantError("POST", "/v1/jobs", `{"kind":"k","unique_key":"a\u0001"}`, 400, CodeInvalidField, "unique_key")
	e.wantError("POST", "/v1/jobs", `{"kind":"k","unique_for_seconds":10}`, 400, CodeInvalidField, "unique_for_seconds")
	e.wantError("POST", "/v1/jobs", `{"kind":"k","unique_key":"x","unique_for_seconds":0.5}`, 400, CodeInvalidField, "unique_for_seconds")
	e.wantError("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"k"},{"kind":"k","unique_key":""}]}`, 400, CodeInvalidField, "jobs[1].unique_key")
}

func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, nil)
	send := func(key, body string) (int, Job) {
		t.Helper()
		var j Job
		status, b := e.request(context.Background(), "POST", "/v1/jobs", body, "", "",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": key})
		if status < 300 {
			mustUnmarshal(t, b, &j)
		}
		return status, j
	}
	status, a := send("req-7", `{"kind":"k"}`)
	if status != 201 || a.UniqueKey != IdempotencyKeyPrefix+"req-7" || a.UniqueUntil == nil {
		t.Fatalf("%d %+v", status, a)
	}
	// The job finishes; the retried request still finds it.
	e.must("POST", "/v1/jobs/"+itoa(a.ID)+"/cancel", "", 200, nil)
	status, b := send("req-7", `{"kind":"k"}`)
	if status != 200 || !b.Duplicate || b.ID != a.ID {
		t.Fatalf("retried request: %d %+v", status, b)
	}
	// The same request written differently is the same request.
	status, c := send("req-9", `{"kind":"k","payload":{"a":1,"b":[1e2]},"tags":["x","y"],"keys":["g","h"]}`)
	if status != 201 {
		t.Fatalf("req-9: %d", status)
	}
	status, d := send("req-9", `{"payload":{"b":[100],"a":1.0},"kind":"k","tags":["y","x","y"],"group":"g","keys":["g","h"],"priority":0}`)
	if status != 200 || !d.Duplicate || d.ID != c.ID {
		t.Fatalf("req-9 again: %d %+v", status, d)
	}
	// A different request under a used key is a 422 naming what differs,
	// and changes nothing.
	before := e.fingerprint()
	for _, tc := range []struct{ body, field string }{
		{`{"kind":"other"}`, "kind"},
		{`{"kind":"k","queue":"q2"}`, "queue"},
		{`{"kind":"k","payload":{"a":2}}`, "payload"},
		{`{"kind":"k","priority":5}`, "priority"},
		{`{"kind":"k","max_attempts":3}`, "max_attempts"},
		{`{"kind":"k","group":"g"}`, "keys"},
		{`{"kind":"k","tags":["t"]}`, "tags"},
	} {
		status, body := e.request(context.Background(), "POST", "/v1/jobs", tc.body, "", "",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "req-7"})
		checkError(t, "req-7 with "+tc.body, status, body, http.StatusUnprocessableEntity, CodeIdempotencyMismatch, tc.field)
		if !strings.Contains(string(body), "job "+itoa(a.ID)) {
			t.Errorf("req-7 with %s: %s, want the message to name job %d", tc.body, body, a.ID)
		}
	}
	if after := e.fingerprint(); after != before {
		t.Errorf("refused requests changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// Numbers compare by their exact value: the same value written
	// otherwise is the same request, a value a float64 cannot tell apart
	// is another.
	for i, tc := range []struct {
		first, again string
		same         bool
	}{
		{`{"n":[1e2,-0.50,0,1.5e-3,1e300]}`, `{"n":[100,-5e-1,-0.0,0.0015,1e+300]}`, true},
		{`{"n":1e400}`, `{"n":1e400}`, true},
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{`{"n":0.1}`, `{"n":0.10000000000000001}`, false},
		{`{"n":1e-400}`, `{"n":0}`, false},
	} {
		key := fmt.Sprintf("num-%d", i)
		if status, _ := send(key, `{"kind":"k","payload":`+tc.first+`}`); status != 201 {
			t.Fatalf("%s: %d", tc.first, status)
		}
		status, _ := send(key, `{"kind":"k","payload":`+tc.again+`}`)
		if want := map[bool]int{true: 200, false: 422}[tc.same]; status != want {
			t.Errorf("payload %s then %s: %d, want %d", tc.first, tc.again, status, want)
		}
	}
	// A body's unique_key may not take the header's prefix.
	e.wantError("POST", "/v1/jobs", `{"kind":"k","unique_key":"idempotency:req-7"}`, 400, CodeInvalidField, "unique_key")
	// The header's keys and unique_key values never meet.
	var u Job
	e.must("POST", "/v1/jobs", `{"kind":"k","unique_key":"req-7"}`, 201, &u)
	if status, _ := send("req-8", `{"kind":"k","unique_key":"x"}`); status != 400 {
		t.Fatalf("both a header and unique_key: %d", status)
	}
	if status, _ := send(strings.Repeat("a", MaxIdempotencyKeyLen+1), `{"kind":"k"}`); status != 400 {
		t.Fatalf("long key: %d", status)
	}
}

func TestSchedulesAPI(t *testing.T) {
	e := newEnv(t, nil)
	e.must("GET", "/v1/schedules", "", 200, nil)
	var sc Schedule
	e.must("PUT", "/v1/schedules/reports", `{"cron":"@every 1s","job":{"kind":"report","queue":"q","payload":{"a":1}}}`, 201, &sc)
	if sc.Name != "reports" || sc.Cron != "@every 1s" || sc.TimeZone != "UTC" || sc.CatchUp != "skip" || sc.Paused ||
		sc.Job.Kind != "report" || sc.Job.Queue != "q" || sc.NextRunAt == nil || sc.Job.MaxAttempts != 25 {
		t.Fatalf("put: %+v", sc)
	}
	e.must("PUT", "/v1/schedules/reports", `{"cron":"0 9 * * MON-FRI","time_zone":"Europe/Paris","catch_up":"once","job":{"kind":"report","group":"g"}}`, 200, &sc)
	if sc.TimeZone != "Europe/Paris" || sc.CatchUp != "once" || sc.Job.Group == nil || *sc.Job.Group != "g" {
		t.Fatalf("replace: %+v", sc)
	}
	var list SchedulesResponse
	e.must("GET", "/v1/schedules", "", 200, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Name != "reports" {
		t.Fatalf("list: %+v", list)
	}
	e.must("POST", "/v1/schedules/reports/pause", "", 200, &sc)
	if !sc.Paused || sc.NextRunAt != nil {
		t.Fatalf("paused: %+v", sc)
	}
	e.must("POST", "/v1/schedules/reports/resume", "{}", 200, &sc)
	if sc.Paused || sc.NextRunAt == nil {
		t.Fatalf("resumed: %+v", sc)
	}
	// Runs show the job each tick made.
	e.must("PUT", "/v1/schedules/fast", `{"cron":"@every 1s","job":{"kind":"tick"}}`, 201, &sc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var got Schedule
		e.must("GET", "/v1/schedules/fast", "", 200, &got)
		if len(got.Runs) > 0 {
			if got.LastJobID == nil || *got.LastJobID != got.Runs[0].JobID || got.LastRunAt == nil {
				t.Fatalf("runs %+v, last %v %v", got.Runs, got.LastJobID, got.LastRunAt)
			}
			e.must("GET", "/v1/jobs/"+itoa(got.Runs[0].JobID), "", 200, nil)
			break
		}
		if _, err := fireDue(ctx, e); err != nil || ctx.Err() != nil {
			t.Fatalf("no run: %v %v", err, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Errors.
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"61 * * * *","job":{"kind":"k"}}`, 400, CodeInvalidField, "cron")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","job":{"kind":"k","queue":""}}`, 400, CodeInvalidField, "job.queue")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","time_zone":"Nowhere/City","job":{"kind":"k"}}`, 400, CodeInvalidField, "time_zone")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly"}`, 400, CodeInvalidField, "job")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","job":{}}`, 400, CodeInvalidField, "job.kind")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","job":{"kind":"k","run_at":"2030-01-01T00:00:00Z"}}`, 400, CodeInvalidField, "job.run_at")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","catch_up":"all","job":{"kind":"k"}}`, 400, CodeInvalidField, "catch_up")
	e.wantError("PUT", "/v1/schedules/bad", `{"cron":"@hourly","job":{"kind":"k"},"extra":1}`, 400, CodeInvalidField, "extra")
	e.wantError("GET", "/v1/schedules/none", "", 404, CodeNotFound, "")
	e.wantError("POST", "/v1/schedules/none/pause", "", 404, CodeNotFound, "")
	e.must("DELETE", "/v1/schedules/reports", "", 204, nil)
	e.wantError("DELETE", "/v1/schedules/reports", "", 404, CodeNotFound, "")
	var left SchedulesResponse
	e.must("GET", "/v1/schedules", "", 200, &left)
	if len(left.Schedules) != 1 {
		t.Fatalf("left: %+v", left)
	}
}
