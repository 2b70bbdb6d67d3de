package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast"
)

func TestEnqueueAndGet(t *testing.T) {
	e := newEnv(t, nil)
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	body := fmt.Sprintf(`{"kind":"email","payload":{"to":"a@example.com","n":[1,2]},"queue":"mail","priority":-5,"run_at":%q,"max_attempts":3,"group":"user-1"}`,
		runAt.Format(time.RFC3339))
	raw := e.must("POST", "/v1/jobs", body, http.StatusCreated, nil)
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	if j.ID < 1 || j.Kind != "email" || j.Queue != "mail" || j.Priority != -5 || j.MaxAttempts != 3 ||
		j.State != readpast.StatePending || j.Attempt != 0 || j.Group == nil || *j.Group != "user-1" {
		t.Fatalf("enqueued job = %+v", j)
	}
	if !j.RunAt.Equal(runAt) {
		t.Errorf("run_at = %v, want %v", j.RunAt, runAt)
	}
	if j.CreatedAt.IsZero() || time.Since(j.CreatedAt) > time.Minute {
		t.Errorf("created_at = %v", j.CreatedAt)
	}
	var payload map[string]any
	if err := json.Unmarshal(j.Payload, &payload); err != nil || payload["to"] != "a@example.com" {
		t.Errorf("payload = %s", j.Payload)
	}
	// The wire contract: errors is an array, never null; times RFC 3339.
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if errs, ok := m["errors"].([]any); !ok || len(errs) != 0 {
		t.Errorf("errors = %#v, want []", m["errors"])
	}
	for _, k := range []string{"run_at", "created_at"} {
		if _, err := time.Parse(time.RFC3339, m[k].(string)); err != nil {
			t.Errorf("%s = %v: %v", k, m[k], err)
		}
	}
	for _, k := range []string{"token", "lease_expires_at", "started_at", "finished_at", "result", "worker"} {
		if _, ok := m[k]; ok {
			t.Errorf("pending job carries %s: %s", k, raw)
		}
	}

	got := e.get(j.ID)
	if mustJSON(t, got) != mustJSON(t, j) {
		t.Errorf("GET = %+v\nwant  %+v", got, j)
	}

	// Defaults, and group null when none.
	raw = e.must("POST", "/v1/jobs", `{"kind":"k"}`, http.StatusCreated, nil)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["group"]; !ok || v != nil {
		t.Errorf("group = %#v, want null in %s", v, raw)
	}
	if m["queue"] != "default" || m["max_attempts"] != float64(readpast.DefaultMaxAttempts) || m["priority"] != float64(0) {
		t.Errorf("defaults wrong: %s", raw)
	}
	if p, _ := json.Marshal(m["payload"]); string(p) != "{}" {
		t.Errorf("default payload = %s", p)
	}
}

func TestEnqueueRejectsBadInput(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("x", readpast.MaxNameLen+1)
	cases := []struct {
		body, code, field string
	}{
		{``, CodeMalformedJSON, ""},
		{`{`, CodeMalformedJSON, ""},
		{`[]`, CodeMalformedJSON, ""},
		{`null`, CodeMalformedJSON, ""},
		{`"kind"`, CodeMalformedJSON, ""},
		{`{"kind":"a"} {"kind":"b"}`, CodeMalformedJSON, ""},
		{`{"kind":"a",}`, CodeMalformedJSON, ""},
		{`{"kind":"a","payload":}`, CodeMalformedJSON, ""},
		{`{}`, CodeInvalidField, "kind"},
		{`{"kind":""}`, CodeInvalidField, "kind"},
		{`{"kind":"a b"}`, CodeInvalidField, "kind"},
		{`{"kind":"` + long + `"}`, CodeInvalidField, "kind"},
		{`{"kind":1}`, CodeInvalidField, "kind"},
		{`{"kind":"a","bogus":1}`, CodeInvalidField, "bogus"},
		{`{"kind":"a","":1}`, CodeInvalidField, `""`},
		{`{"kind":"a","Kind":"b"}`, CodeInvalidField, "Kind"},
		{`{"KIND":"a"}`, CodeInvalidField, "KIND"},
		{`{"kind":"a","kind":"b"}`, CodeInvalidField, "kind"},
		{`{"kind":"a","priority":"high"}`, CodeInvalidField, "priority"},
		{`{"kind":"a","priority":1.5}`, CodeInvalidField, "priority"},
		{`{"kind":"a","priority":1e40}`, CodeInvalidField, "priority"},
		{`{"kind":"a","priority":5000}`, CodeInvalidField, "priority"},
		{`{"kind":"a","priority":-1001}`, CodeInvalidField, "priority"},
		{`{"kind":"a","max_attempts":0}`, CodeInvalidField, "max_attempts"},
		{`{"kind":"a","max_attempts":-1}`, CodeInvalidField, "max_attempts"},
		{`{"kind":"a","max_attempts":100000}`, CodeInvalidField, "max_attempts"},
		{`{"kind":"a","max_attempts":"3"}`, CodeInvalidField, "max_attempts"},
		{`{"kind":"a","run_at":"tomorrow"}`, CodeInvalidField, "run_at"},
		{`{"kind":"a","run_at":"0001-01-01T00:00:00Z"}`, CodeInvalidField, "run_at"},
		// The year is the UTC one: these are 10000-01-01 and 1969-12-31 in UTC.
		{`{"kind":"a","run_at":"9999-12-31T23:59:59-05:00"}`, CodeInvalidField, "run_at"},
		{`{"kind":"a","run_at":"1970-01-01T00:00:00+01:00"}`, CodeInvalidField, "run_at"},
		// What Go reads and RFC 3339 has not: an offset of 24 hours, a
		// decimal comma.
		{`{"kind":"a","run_at":"2030-01-01T00:00:00+24:00"}`, CodeInvalidField, "run_at"},
		{`{"kind":"a","run_at":"2030-01-01T00:00:00-24:00"}`, CodeInvalidField, "run_at"},
		{`{"kind":"a","run_at":"2030-01-01T00:00:00,5Z"}`, CodeInvalidField, "run_at"},
		// An empty queue is refused, not read as the default.
		{`{"kind":"a","queue":""}`, CodeInvalidField, "queue"},
		{`{"kind":"a","run_at":12}`, CodeInvalidField, "run_at"},
		{`{"kind":"a","queue":"two words"}`, CodeInvalidField, "queue"},
		{`{"kind":"a","queue":["q"]}`, CodeInvalidField, "queue"},
		{`{"kind":"a","group":"` + long + `"}`, CodeInvalidField, "group"},
		{`{"kind":"a","group":"tab\there"}`, CodeInvalidField, "group"},
		{`{"kind":"a\u0000"}`, CodeInvalidField, "kind"},
	}
	for _, c := range cases {
		e.wantError("POST", "/v1/jobs", c.body, http.StatusBadRequest, c.code, c.field)
	}
	if n := e.total(); n != 0 {
		t.Errorf("bad requests stored %d jobs", n)
	}
	// A body over the limit is 413.
	e2 := newEnv(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	big := `{"kind":"a","payload":"` + strings.Repeat("x", 2000) + `"}`
	e2.wantError("POST", "/v1/jobs", big, http.StatusRequestEntityTooLarge, CodeTooLarge, "")
	if n := e2.total(); n != 0 {
		t.Errorf("too large request stored %d jobs", n)
	}
}

func TestEnqueueBatch(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatch = 5 })
	var r JobsResponse
	e.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b","queue":"q2","payload":[1]},{"kind":"c","group":"g"}]}`,
		http.StatusCreated, &r)
	if len(r.Jobs) != 3 {
		t.Fatalf("got %d jobs", len(r.Jobs))
	}
	for i, want := range []string{"a", "b", "c"} {
		if r.Jobs[i].Kind != want || r.Jobs[i].State != readpast.StatePending {
			t.Errorf("job %d = %+v", i, r.Jobs[i])
		}
		if i > 0 && r.Jobs[i].ID <= r.Jobs[i-1].ID {
			t.Errorf("ids not increasing: %d after %d", r.Jobs[i].ID, r.Jobs[i-1].ID)
		}
	}
	before := e.fingerprint()
	cases := []struct {
		body        string
		status      int
		code, field string
	}{
		{`{"jobs":[{"kind":"a"},{"kind":"b"},{"kind":"c","priority":99999}]}`, 400, CodeInvalidField, "jobs[2].priority"},
		{`{"jobs":[{"kind":"a"},{"kind":"b","nope":1}]}`, 400, CodeInvalidField, "jobs[1].nope"},
		{`{"jobs":[{"kind":"a"},{"kind":2}]}`, 400, CodeInvalidField, "jobs[1].kind"},
		{`{"jobs":[1]}`, 400, CodeInvalidField, "jobs[0]"},
		{`{"jobs":[]}`, 400, CodeInvalidField, "jobs"},
		{`{"jobs":null}`, 400, CodeInvalidField, "jobs"},
		{`{}`, 400, CodeInvalidField, "jobs"},
		{`{"jobs":{}}`, 400, CodeInvalidField, "jobs"},
		{`{"job":[]}`, 400, CodeInvalidField, "job"},
		{`{"jobs":[{"kind":"a"}]`, 400, CodeMalformedJSON, ""},
		{`{"jobs":[{"kind":"a"},{"kind":"a"},{"kind":"a"},{"kind":"a"},{"kind":"a"},{"kind":"a"}]}`, 413, CodeBatchTooLarge, "jobs"},
	}
	for _, c := range cases {
		e.wantError("POST", "/v1/jobs/batch", c.body, c.status, c.code, c.field)
	}
	// An Idempotency-Key is refused, naming the header: it would apply to
	// no job (each job gives its own unique_key).
	status, body := e.request(context.Background(), "POST", "/v1/jobs/batch", `{"jobs":[{"kind":"a"}]}`, "", "",
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k1"})
	checkError(t, "POST /v1/jobs/batch with Idempotency-Key", status, body, 400, CodeInvalidField, "Idempotency-Key")
	if after := e.fingerprint(); after != before {
		t.Errorf("rejected batches changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

func TestClaimHeartbeatComplete(t *testing.T) {
	e := newEnv(t, nil)
	j := e.enqueue(`{"kind":"add","payload":{"n":[1,2]},"queue":"work"}`)
	if jobs := e.claim(`{"worker":"w1"}`); len(jobs) != 0 {
		t.Fatalf("claim from the default queue got %+v", jobs)
	}
	start := time.Now()
	jobs := e.claim(`{"worker":"w1","queues":["work","other"],"limit":10,"lease_seconds":30}`)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	c := jobs[0]
	if c.ID != j.ID || c.Token == "" || c.State != readpast.StateRunning || c.Attempt != 1 || c.Worker != "w1" ||
		c.LeaseExpiresAt == nil || c.StartedAt == nil {
		t.Fatalf("claimed job = %+v", c)
	}
	if d := c.LeaseExpiresAt.Sub(start); d < 25*time.Second || d > 35*time.Second {
		t.Errorf("lease expires in %v, want about 30s", d)
	}
	// The token is only in the claim response.
	if raw := e.must("GET", "/v1/jobs/"+itoa(j.ID), "", 200, nil); bytes.Contains(raw, []byte(c.Token)) {
		t.Errorf("GET leaks the claim token: %s", raw)
	}

	var hb HeartbeatResponse
	e.must("POST", "/v1/jobs/"+itoa(j.ID)+"/heartbeat", `{"token":"`+c.Token+`","lease_seconds":120}`, 200, &hb)
	if hb.ID != j.ID || hb.LeaseExpiresAt.Sub(start) < 110*time.Second {
		t.Errorf("heartbeat = %+v", hb)
	}
	e.must("POST", "/v1/jobs/"+itoa(j.ID)+"/heartbeat", `{"token":"`+c.Token+`"}`, 200, &hb)
	if d := time.Until(hb.LeaseExpiresAt); d < 50*time.Second || d > 70*time.Second {
		t.Errorf("default heartbeat lease %v, want about %ds", d, DefaultLeaseSeconds)
	}

	id := itoa(j.ID)
	before := e.fingerprint()
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":"not-the-token"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"not-the-token"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":""}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":"`+strings.Repeat("t", MaxTokenLen+1)+`"}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":"`+c.Token+`","extra":1}`, 400, CodeInvalidField, "extra")
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":7}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"`+c.Token+`","lease_seconds":0}`, 400, CodeInvalidField, "lease_seconds")
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"`+c.Token+`","lease_seconds":-1}`, 400, CodeInvalidField, "lease_seconds")
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"`+c.Token+`","lease_seconds":1e300}`, 400, CodeInvalidField, "lease_seconds")
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"`+c.Token+`","lease_seconds":"9"}`, 400, CodeInvalidField, "lease_seconds")
	e.wantError("POST", "/v1/jobs/999999/complete", `{"token":"`+c.Token+`"}`, 404, CodeNotFound, "")
	e.wantError("POST", "/v1/jobs/abc/complete", `{"token":"`+c.Token+`"}`, 400, CodeInvalidField, "id")
	if after := e.fingerprint(); after != before {
		t.Errorf("rejected requests changed the store:\nbefore %s\nafter  %s", before, after)
	}

	var done Job
	e.must("POST", "/v1/jobs/"+id+"/complete", `{"token":"`+c.Token+`","result":{"sum":3}}`, 200, &done)
	if done.State != readpast.StateSucceeded || done.FinishedAt == nil || string(done.Result) != `{"sum":3}` {
		t.Fatalf("completed job = %+v (result %s)", done, done.Result)
	}
	got := e.get(j.ID)
	if got.State != readpast.StateSucceeded || string(got.Result) != `{"sum":3}` || got.LeaseExpiresAt != nil {
		t.Errorf("GET finished job = %+v", got)
	}
	// Completing again with the same token is idempotent; other writes
	// with it are stale now.
	e.must("POST", "/v1/jobs/"+id+"/complete", `{"token":"`+c.Token+`","result":{"sum":3}}`, 200, nil)
	e.wantError("POST", "/v1/jobs/"+id+"/heartbeat", `{"token":"`+c.Token+`"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":"x"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/"+id+"/release", `{"token":"`+c.Token+`"}`, 409, CodeStaleToken, "")
}

func TestClaimRejectsBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.enqueue(`{"kind":"a"}`)
	before := e.fingerprint()
	many := make([]string, MaxClaimQueues+1)
	for i := range many {
		many[i] = fmt.Sprintf("q%d", i)
	}
	cases := []struct{ body, code, field string }{
		{``, CodeMalformedJSON, ""},
		{`{"worker":"w"`, CodeMalformedJSON, ""},
		{`{}`, CodeInvalidField, "worker"},
		{`{"worker":""}`, CodeInvalidField, "worker"},
		{`{"worker":"a b"}`, CodeInvalidField, "worker"},
		{`{"worker":5}`, CodeInvalidField, "worker"},
		{`{"worker":"w","limit":0}`, CodeInvalidField, "limit"},
		{`{"worker":"w","limit":-1}`, CodeInvalidField, "limit"},
		{`{"worker":"w","limit":100001}`, CodeInvalidField, "limit"},
		{`{"worker":"w","limit":2.5}`, CodeInvalidField, "limit"},
		{`{"worker":"w","lease_seconds":0}`, CodeInvalidField, "lease_seconds"},
		{`{"worker":"w","lease_seconds":-3}`, CodeInvalidField, "lease_seconds"},
		{`{"worker":"w","lease_seconds":90000}`, CodeInvalidField, "lease_seconds"},
		{`{"worker":"w","wait_seconds":-1}`, CodeInvalidField, "wait_seconds"},
		{`{"worker":"w","wait_seconds":301}`, CodeInvalidField, "wait_seconds"},
		{`{"worker":"w","wait_seconds":"5"}`, CodeInvalidField, "wait_seconds"},
		{`{"worker":"w","queues":"default"}`, CodeInvalidField, "queues"},
		{`{"worker":"w","queues":[""]}`, CodeInvalidField, "queues"},
		{`{"worker":"w","queues":["a b"]}`, CodeInvalidField, "queues"},
		{`{"worker":"w","queues":[1]}`, CodeInvalidField, "queues"},
		{`{"worker":"w","queues":` + mustJSON(t, many) + `}`, CodeInvalidField, "queues"},
		{`{"worker":"w","limitt":1}`, CodeInvalidField, "limitt"},
	}
	for _, c := range cases {
		e.wantError("POST", "/v1/claim", c.body, http.StatusBadRequest, c.code, c.field)
	}
	if after := e.fingerprint(); after != before {
		t.Errorf("rejected claims changed the store")
	}
}

func TestClaimLongPoll(t *testing.T) {
	e := newEnv(t, nil)

	// Times out with an empty list.
	start := time.Now()
	if jobs := e.claim(`{"worker":"w","wait_seconds":0.3}`); len(jobs) != 0 {
		t.Fatalf("claimed %+v from an empty queue", jobs)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("wait of 0.3s returned after %v", d)
	}
	raw := e.must("POST", "/v1/claim", `{"worker":"w","wait_seconds":0.05}`, 200, nil)
	if strings.TrimSpace(string(raw)) != `{"jobs":[]}` {
		t.Errorf("empty claim body = %s, want {\"jobs\":[]}", raw)
	}

	// Wakes as soon as a job is enqueued.
	got := make(chan []Job, 1)
	start = time.Now()
	go func() {
		var r JobsResponse
		_, b := e.do("POST", "/v1/claim", `{"worker":"w","wait_seconds":20}`)
		_ = json.Unmarshal(b, &r)
		got <- r.Jobs
	}()
	time.Sleep(300 * time.Millisecond)
	j := e.enqueue(`{"kind":"a"}`)
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].ID != j.ID || jobs[0].Token == "" {
			t.Fatalf("long poll claimed %+v", jobs)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("long poll took %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not return after an enqueue")
	}
}

// noNotify hides the store's Notifier, so claims can only poll.
type noNotify struct{ readpast.Store }

func TestClaimLongPollWithoutNotifier(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Store = noNotify{c.Store} })
	// A job that becomes runnable later wakes no one: the poll finds it.
	runAt := time.Now().Add(700 * time.Millisecond).UTC()
	j := e.enqueue(`{"kind":"later","run_at":"` + runAt.Format(time.RFC3339Nano) + `"}`)
	start := time.Now()
	jobs := e.claim(`{"worker":"w","wait_seconds":10}`)
	if len(jobs) != 1 || jobs[0].ID != j.ID {
		t.Fatalf("claimed %+v", jobs)
	}
	if jobs[0].StartedAt == nil || jobs[0].StartedAt.Before(runAt) {
		t.Errorf("claimed at %v, before run_at %v", jobs[0].StartedAt, runAt)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("poll took %v", d)
	}
}

func TestClaimLongPollEndsOnClosing(t *testing.T) {
	closing := make(chan struct{})
	e := newEnv(t, func(c *Config) { c.Closing = closing })
	time.AfterFunc(200*time.Millisecond, func() { close(closing) })
	start := time.Now()
	if jobs := e.claim(`{"worker":"w","wait_seconds":30}`); len(jobs) != 0 {
		t.Fatalf("claimed %+v", jobs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closing ended the long poll only after %v", d)
	}
}

func TestClaimClientDisconnect(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.doCtx(ctx, "POST", "/v1/claim", `{"worker":"gone","wait_seconds":30}`, "")
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	// The abandoned long poll must not take this job, not even for a
	// moment: a claim released at once would still leave the job pending,
	// but Release keeps the worker and start time it set.
	j := e.enqueue(`{"kind":"a"}`)
	time.Sleep(500 * time.Millisecond)
	got := e.get(j.ID)
	if got.State != readpast.StatePending || got.Worker != "" || got.StartedAt != nil || got.Attempt != 0 {
		t.Fatalf("job after the client went away was claimed: %+v", got)
	}
}

func TestFail(t *testing.T) {
	e := newEnv(t, nil)

	// Without retry_at the default backoff applies: about 1s after attempt 1.
	j := e.enqueue(`{"kind":"f","max_attempts":2}`)
	c := e.claim(`{"worker":"w"}`)[0]
	id := itoa(j.ID)
	before := e.fingerprint()
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`"}`, 400, CodeInvalidField, "error")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":null}`, 400, CodeInvalidField, "error")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":"x","retry_at":"soon"}`, 400, CodeInvalidField, "retry_at")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":"x","discard":"yes"}`, 400, CodeInvalidField, "discard")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"error":"x"}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"stale","error":"x"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/424242/fail", `{"token":"stale","error":"x"}`, 404, CodeNotFound, "")
	if after := e.fingerprint(); after != before {
		t.Errorf("rejected fails changed the store")
	}
	failedAt := time.Now()
	var f Job
	e.must("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":"boom","stack":"line 1"}`, 200, &f)
	if f.State != readpast.StatePending || f.Attempt != 1 || len(f.Errors) != 1 || f.Errors[0].Message != "boom" ||
		f.Errors[0].Attempt != 1 || f.Errors[0].Stack != "line 1" {
		t.Fatalf("failed job = %+v", f)
	}
	if d := f.RunAt.Sub(failedAt); d < 700*time.Millisecond || d > 5*time.Second {
		t.Errorf("retry in %v, want about 1s (DefaultRetryPolicy(1))", d)
	}
	// The same token cannot fail it twice.
	e.wantError("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+c.Token+`","error":"again"}`, 409, CodeStaleToken, "")

	// With retry_at in the past it is claimable at once; the last attempt
	// fails it for good.
	var jobs []Job
	deadline := time.Now().Add(5 * time.Second)
	for len(jobs) == 0 && time.Now().Before(deadline) {
		jobs = e.claim(`{"worker":"w","wait_seconds":1}`)
	}
	if len(jobs) != 1 || jobs[0].Attempt != 2 {
		t.Fatalf("second claim = %+v", jobs)
	}
	e.must("POST", "/v1/jobs/"+id+"/fail", `{"token":"`+jobs[0].Token+`","error":"boom again","retry_at":"2000-01-01T00:00:00Z"}`, 200, &f)
	if f.State != readpast.StateFailed || len(f.Errors) != 2 || f.FinishedAt == nil {
		t.Fatalf("job after its last attempt = %+v", f)
	}

	// retry_at is honoured; discard fails for good at once.
	j2 := e.enqueue(`{"kind":"f2"}`)
	c2 := e.claim(`{"worker":"w"}`)[0]
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	e.must("POST", "/v1/jobs/"+itoa(j2.ID)+"/fail", `{"token":"`+c2.Token+`","error":"later","retry_at":"`+at.Format(time.RFC3339)+`"}`, 200, &f)
	if f.State != readpast.StatePending || !f.RunAt.Equal(at) {
		t.Errorf("job failed with retry_at = %+v", f)
	}
	j3 := e.enqueue(`{"kind":"f3"}`)
	c3 := e.claim(`{"worker":"w"}`)[0]
	if c3.ID != j3.ID {
		t.Fatalf("claimed %d, want %d", c3.ID, j3.ID)
	}
	e.must("POST", "/v1/jobs/"+itoa(j3.ID)+"/fail", `{"token":"`+c3.Token+`","error":"","discard":true}`, 200, &f)
	if f.State != readpast.StateFailed || f.Attempt != 1 {
		t.Errorf("discarded job = %+v", f)
	}
}

func TestRelease(t *testing.T) {
	e := newEnv(t, nil)
	j := e.enqueue(`{"kind":"a"}`)
	c := e.claim(`{"worker":"w"}`)[0]
	id := itoa(j.ID)
	e.wantError("POST", "/v1/jobs/"+id+"/release", `{}`, 400, CodeInvalidField, "token")
	e.wantError("POST", "/v1/jobs/"+id+"/release", `{"token":"x","y":1}`, 400, CodeInvalidField, "y")
	e.wantError("POST", "/v1/jobs/"+id+"/release", `{"token":"nope"}`, 409, CodeStaleToken, "")
	e.wantError("POST", "/v1/jobs/0/release", `{"token":"nope"}`, 400, CodeInvalidField, "id")
	var r Job
	e.must("POST", "/v1/jobs/"+id+"/release", `{"token":"`+c.Token+`"}`, 200, &r)
	if r.State != readpast.StatePending || r.LeaseExpiresAt != nil {
		t.Fatalf("released job = %+v", r)
	}
	e.wantError("POST", "/v1/jobs/"+id+"/release", `{"token":"`+c.Token+`"}`, 409, CodeStaleToken, "")
	again := e.claim(`{"worker":"w"}`)
	if len(again) != 1 || again[0].ID != j.ID || again[0].Token == c.Token {
		t.Fatalf("claim after release = %+v", again)
	}
}

func TestCancelRetry(t *testing.T) {
	e := newEnv(t, nil)
	j := e.enqueue(`{"kind":"a"}`)
	id := itoa(j.ID)
	var got Job
	e.must("POST", "/v1/jobs/"+id+"/cancel", "", 200, &got)
	if got.State != readpast.StateCancelled {
		t.Fatalf("cancelled job = %+v", got)
	}
	e.wantError("POST", "/v1/jobs/"+id+"/cancel", "", 409, CodeInvalidState, "")
	e.must("POST", "/v1/jobs/"+id+"/retry", "{}", 200, &got)
	if got.State != readpast.StatePending || got.Attempt != 0 {
		t.Fatalf("retried job = %+v", got)
	}
	e.wantError("POST", "/v1/jobs/"+id+"/retry", `{"now":true}`, 400, CodeInvalidField, "now")
	e.wantError("POST", "/v1/jobs/"+id+"/cancel", `[1]`, 400, CodeMalformedJSON, "")
	e.wantError("POST", "/v1/jobs/999999/cancel", "", 404, CodeNotFound, "")
	e.wantError("POST", "/v1/jobs/999999/retry", "", 404, CodeNotFound, "")
	e.wantError("POST", "/v1/jobs/-4/retry", "", 400, CodeInvalidField, "id")

	c := e.claim(`{"worker":"w"}`)[0]
	e.wantError("POST", "/v1/jobs/"+id+"/retry", "", 409, CodeInvalidState, "")
	e.must("POST", "/v1/jobs/"+id+"/cancel", "", 200, &got)
	if got.State != readpast.StateCancelled {
		t.Fatalf("cancelled running job = %+v", got)
	}
	// Cancelling a running job makes its token stale.
	e.wantError("POST", "/v1/jobs/"+id+"/complete", `{"token":"`+c.Token+`"}`, 409, CodeStaleToken, "")

	j2 := e.enqueue(`{"kind":"b"}`)
	c2 := e.claim(`{"worker":"w"}`)[0]
	e.must("POST", "/v1/jobs/"+itoa(j2.ID)+"/complete", `{"token":"`+c2.Token+`"}`, 200, nil)
	e.wantError("POST", "/v1/jobs/"+itoa(j2.ID)+"/cancel", "", 409, CodeInvalidState, "")
	e.wantError("POST", "/v1/jobs/"+itoa(j2.ID)+"/retry", "", 409, CodeInvalidState, "")

	// The message says why: the job's state, or the job holding the
	// unique key a retry would take back.
	for _, c := range []struct{ path, want string }{
		{"/v1/jobs/" + itoa(j2.ID) + "/cancel", "job " + itoa(j2.ID) + " is succeeded"},
	} {
		_, b := e.do("POST", c.path, "")
		if !strings.Contains(string(b), c.want) {
			t.Errorf("POST %s: %s, want a message saying %q", c.path, b, c.want)
		}
	}
	u := e.enqueue(`{"kind":"u","unique_key":"only-one"}`)
	e.must("POST", "/v1/jobs/"+itoa(u.ID)+"/cancel", "", 200, nil)
	holder := e.enqueue(`{"kind":"u","unique_key":"only-one"}`)
	status, b := e.do("POST", "/v1/jobs/"+itoa(u.ID)+"/retry", "")
	checkError(t, "retry of a job whose key another holds", status, b, 409, CodeInvalidState, "")
	if want := "held by job " + itoa(holder.ID); !strings.Contains(string(b), want) {
		t.Errorf("retry of a job whose key another holds: %s, want a message saying %q", b, want)
	}
}

func TestListAndStats(t *testing.T) {
	e := newEnv(t, nil)
	var ids []int64
	for i := 0; i < 5; i++ {
		q := "q1"
		if i%2 == 1 {
			q = "q2"
		}
		j := e.enqueue(fmt.Sprintf(`{"kind":"k%d","queue":%q,"group":"g%d"}`, i%2, q, i%2))
		ids = append(ids, j.ID)
	}
	c := e.claim(`{"worker":"w","queues":["q2"]}`)[0]
	e.must("POST", "/v1/jobs/"+itoa(c.ID)+"/complete", `{"token":"`+c.Token+`"}`, 200, nil)

	// Pages run newest first and end with next_cursor null.
	var seen []int64
	cursor := ""
	for page := 0; page < 10; page++ {
		path := "/v1/jobs?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		raw := e.must("GET", path, "", 200, nil)
		var r struct {
			Jobs       []Job   `json:"jobs"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte(`"next_cursor"`)) {
			t.Errorf("list response lacks next_cursor: %s", raw)
		}
		for _, j := range r.Jobs {
			seen = append(seen, j.ID)
		}
		if r.NextCursor == nil {
			break
		}
		cursor = *r.NextCursor
	}
	want := []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("paged ids %v, want %v", seen, want)
	}

	count := func(query string) int {
		var r JobsResponse
		e.must("GET", "/v1/jobs?"+query, "", 200, &r)
		return len(r.Jobs)
	}
	for q, n := range map[string]int{
		"queue=q1": 3, "queue=q2": 2, "kind=k1": 2, "state=succeeded": 1, "state=pending": 4,
		"group=g0": 3, "queue=q2&state=pending": 1, "queue=nope": 0, "": 5,
	} {
		if got := count(q); got != n {
			t.Errorf("list %q: %d jobs, want %d", q, got, n)
		}
	}
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=abc", "limit"}, {"limit=5000", "limit"}, {"limit=-1", "limit"},
		{"state=bogus", "state"}, {"cursor=xyz", "cursor"}, {"cursor=0", "cursor"},
		{"foo=1", "foo"}, {"queue=a&queue=b", "queue"}, {"kind=" + strings.Repeat("k", 200), "kind"},
	} {
		e.wantError("GET", "/v1/jobs?"+c.query, "", 400, CodeInvalidField, c.field)
	}

	var st StatsResponse
	e.must("GET", "/v1/stats", "", 200, &st)
	if st.Queues["q1"][readpast.StatePending] != 3 || st.Queues["q2"][readpast.StatePending] != 1 ||
		st.Queues["q2"][readpast.StateSucceeded] != 1 || st.Totals[readpast.StatePending] != 4 || st.Totals[readpast.StateSucceeded] != 1 {
		t.Errorf("stats = %+v", st)
	}
	for _, q := range []string{"q1", "q2"} {
		for _, s := range readpast.AllStates {
			if _, ok := st.Queues[q][s]; !ok {
				t.Errorf("stats for %s lack state %s", q, s)
			}
		}
	}
}

func TestGetNotFoundAndRouting(t *testing.T) {
	e := newEnv(t, nil)
	e.wantError("GET", "/v1/jobs/999", "", 404, CodeNotFound, "")
	e.wantError("GET", "/v1/jobs/x", "", 400, CodeInvalidField, "id")
	e.wantError("GET", "/v1/jobs/99999999999999999999999", "", 400, CodeInvalidField, "id")
	e.wantError("GET", "/v2/nothing", "", 404, CodeNotFound, "")
	e.wantError("PUT", "/v1/jobs/1", "", 405, CodeMethodNotAllowed, "")
	e.wantError("GET", "/v1/claim", "", 405, CodeMethodNotAllowed, "")
	req, _ := http.NewRequest("PUT", e.srv.URL+"/v1/jobs", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "POST") {
		t.Errorf("PUT /v1/jobs: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error content type %q", ct)
	}
}

func TestHealthAndReady(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Tokens = []string{"secret-0123456789abcdef"} })
	e.must("GET", "/healthz", "", 200, nil)
	e.must("GET", "/readyz", "", 200, nil)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.must("GET", "/healthz", "", 200, nil)
	e.wantError("GET", "/readyz", "", 503, CodeUnavailable, "")
}

func TestAuth(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Tokens = []string{"full-1-0123456789abcdef", "full-2-0123456789abcdef"}
		c.ReadTokens = []string{"read-1-0123456789abcdef"}
	})
	do := func(method, path, body, token string) (int, []byte) {
		return e.doCtx(context.Background(), method, path, body, token)
	}
	// Open routes.
	for _, p := range []string{"/healthz", "/readyz"} {
		if st, b := do("GET", p, "", ""); st != 200 {
			t.Errorf("GET %s without token: %d %s", p, st, b)
		}
	}
	// Missing, unknown and malformed credentials.
	for _, p := range []string{"/v1/stats", "/v1/jobs", "/v1/jobs/1", "/metrics", "/v1/openapi.json", "/nope"} {
		st, b := do("GET", p, "", "")
		checkError(t, "GET "+p+" without token", st, b, 401, CodeUnauthorized, "")
		st, b = do("GET", p, "", "wrong")
		checkError(t, "GET "+p+" with a bad token", st, b, 401, CodeUnauthorized, "")
	}
	st, b := do("POST", "/v1/jobs", `{"kind":"a"}`, "")
	checkError(t, "POST without token", st, b, 401, CodeUnauthorized, "")
	st, b = do("POST", "/v1/jobs", `{"kind":"a"}`, "full-1-0123456789abcdefx")
	checkError(t, "POST with a longer token", st, b, 401, CodeUnauthorized, "")
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/stats", nil)
	req.Header.Set("Authorization", "Basic full-1-0123456789abcdef")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("Basic auth: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Two credentials, a good one first or last: neither is taken.
	for _, pair := range [][2]string{{"full-1-0123456789abcdef", "wrong"}, {"wrong", "full-1-0123456789abcdef"}} {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/stats", nil)
		req.Header.Add("Authorization", "Bearer "+pair[0])
		req.Header.Add("Authorization", "Bearer "+pair[1])
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		checkError(t, "two Authorization headers", resp.StatusCode, body, 401, CodeUnauthorized, "")
	}

	// Read tokens may GET only.
	if st, b := do("GET", "/v1/stats", "", "read-1-0123456789abcdef"); st != 200 {
		t.Errorf("read token GET: %d %s", st, b)
	}
	if st, b := do("GET", "/metrics", "", "read-1-0123456789abcdef"); st != 200 {
		t.Errorf("read token GET /metrics: %d %s", st, b)
	}
	for _, p := range []string{"/v1/jobs", "/v1/claim", "/v1/jobs/1/cancel"} {
		st, b := do("POST", p, `{"kind":"a","worker":"w"}`, "read-1-0123456789abcdef")
		checkError(t, "read token POST "+p, st, b, 403, CodeForbidden, "")
	}
	if n := e.total(); n != 0 {
		t.Errorf("unauthorized requests stored %d jobs", n)
	}
	// Full tokens may do everything.
	for _, tok := range []string{"full-1-0123456789abcdef", "full-2-0123456789abcdef"} {
		if st, b := do("POST", "/v1/jobs", `{"kind":"a"}`, tok); st != 201 {
			t.Errorf("full token POST: %d %s", st, b)
		}
		if st, b := do("GET", "/v1/jobs", "", tok); st != 200 {
			t.Errorf("full token GET: %d %s", st, b)
		}
	}
	// A lower-case scheme is accepted, as RFC 9110 makes schemes case-insensitive.
	req, _ = http.NewRequest("GET", e.srv.URL+"/v1/stats", nil)
	req.Header.Set("Authorization", "bearer full-2-0123456789abcdef")
	resp, err = e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("lower-case bearer: %d", resp.StatusCode)
	}
}

func TestAuthOffWithoutTokens(t *testing.T) {
	e := newEnv(t, nil)
	e.must("POST", "/v1/jobs", `{"kind":"a"}`, 201, nil)
	e.must("GET", "/v1/stats", "", 200, nil)
}

func TestMetrics(t *testing.T) {
	// A budget of 16 bodies: the claim of 2 is one store call.
	e := newEnv(t, func(c *Config) { c.MaxResponseBytes = 16 * DefaultMaxBodyBytes })
	e.enqueue(`{"kind":"mk","queue":"mq"}`)
	e.must("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"mk","queue":"mq"},{"kind":"other"}]}`, 201, nil)
	c := e.claim(`{"worker":"w","queues":["mq"],"limit":2}`)
	if len(c) != 2 {
		t.Fatalf("claimed %d", len(c))
	}
	e.must("POST", "/v1/jobs/"+itoa(c[0].ID)+"/complete", `{"token":"`+c[0].Token+`"}`, 200, nil)
	e.must("POST", "/v1/jobs/"+itoa(c[1].ID)+"/fail", `{"token":"`+c[1].Token+`","error":"x"}`, 200, nil)

	raw := string(e.must("GET", "/metrics", "", 200, nil))
	for _, want := range []string{
		`readpast_jobs_enqueued_total{kind="mk",queue="mq"} 2`,
		`readpast_jobs_enqueued_total{kind="other",queue="default"} 1`,
		`readpast_jobs_claimed_total{kind="mk",queue="mq"} 2`,
		`readpast_jobs_completed_total{kind="mk",queue="mq"} 1`,
		`readpast_jobs_failed_total{kind="mk",queue="mq"} 1`,
		`readpast_queue_jobs{queue="mq",state="succeeded"} 1`,
		`readpast_queue_jobs{queue="mq",state="pending"} 1`,
		`readpast_queue_jobs{queue="default",state="pending"} 1`,
		`readpast_queue_jobs{queue="default",state="running"} 0`,
		`readpast_queue_stats_up 1`,
		`readpast_claim_duration_seconds_count 1`,
		`readpast_job_start_delay_seconds_count 2`,
		`readpast_http_requests_total{code="201",route="POST /v1/jobs"} 1`,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The handler registers on the registry it is given, and only once.
	if _, err := New(Config{Store: e.store, Registry: e.reg}); err == nil {
		t.Error("New registered the same metrics twice")
	}
	// Without a registry there is no /metrics.
	e2 := newEnv(t, func(c *Config) { c.Registry = nil })
	e2.wantError("GET", "/metrics", "", 404, CodeNotFound, "")
}

func TestNewRejectsBadConfig(t *testing.T) {
	e := newEnv(t, nil)
	for name, cfg := range map[string]Config{
		"no store":        {},
		"empty token":     {Store: e.store, Tokens: []string{""}},
		"empty read":      {Store: e.store, ReadTokens: []string{"a-0123456789abcdef", ""}},
		"negative body":   {Store: e.store, MaxBodyBytes: -1},
		"negative batch":  {Store: e.store, MaxBatch: -1},
		"negative poll":   {Store: e.store, PollInterval: -1},
		"double registry": {Store: e.store, Registry: e.reg},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := New(Config{Store: e.store, Registry: prometheus.NewRegistry()}); err != nil {
		t.Errorf("New with a fresh registry: %v", err)
	}
}

func TestResponsesAreJSON(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/healthz", ""}, {"GET", "/v1/stats", ""}, {"POST", "/v1/jobs", `{"kind":"a"}`},
		{"POST", "/v1/jobs", `nope`}, {"GET", "/v1/jobs/77", ""},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: content type %q", c.method, c.path, ct)
		}
		if !json.Valid(b) {
			t.Errorf("%s %s: body is not JSON: %s", c.method, c.path, b)
		}
	}
}
