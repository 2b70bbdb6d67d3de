package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/readpast/readpast"
)

// flowStores runs test on a handler over each store: SQLite and
// PostgreSQL.
func flowStores(t *testing.T, test func(t *testing.T, e *testEnv)) {
	t.Run("sqlite", func(t *testing.T) { test(t, newEnv(t, nil)) })
	t.Run("postgres", func(t *testing.T) { test(t, newPostgresEnv(t, nil)) })
}

// enqueueFlow posts a flow and requires 201 with one job per entry.
func (e *testEnv) enqueueFlow(body string, n int) []Job {
	e.t.Helper()
	var r JobsResponse
	e.must("POST", "/v1/flows", body, http.StatusCreated, &r)
	if len(r.Jobs) != n {
		e.t.Fatalf("POST /v1/flows %s: %d jobs, want %d", trunc(body), len(r.Jobs), n)
	}
	return r.Jobs
}

// TestFlowEnqueueAndRelease: POST /v1/flows stores the jobs in request
// order, those with edges blocked, lists and counts them, never lets a
// claim take a blocked job, and releases a child once its parents have
// succeeded; a failed parent cancels a cancel_child child.
func TestFlowEnqueueAndRelease(t *testing.T) {
	flowStores(t, func(t *testing.T, e *testEnv) {
		before := e.enqueue(`{"kind":"prior","queue":"fq"}`)
		jobs := e.enqueueFlow(fmt.Sprintf(`{"jobs":[
			{"ref":"a","kind":"extract","queue":"fq","payload":{"n":1},"tags":["f1"]},
			{"ref":"b","kind":"render","queue":"fq","after":[{"ref":"a"}]},
			{"kind":"email","queue":"fq","max_attempts":3,"after":[{"ref":"a"},{"ref":"b","policy":"run_anyway"},{"job_id":%d,"policy":"hold_child"}]}
		]}`, before.ID), 3)
		want := []struct {
			kind  string
			state readpast.JobState
		}{{"extract", readpast.StatePending}, {"render", readpast.StateBlocked}, {"email", readpast.StateBlocked}}
		for i, w := range want {
			if jobs[i].Kind != w.kind || jobs[i].State != w.state {
				t.Errorf("jobs[%d] is %s %s, want %s %s", i, jobs[i].Kind, jobs[i].State, w.kind, w.state)
			}
		}
		if jobs[0].Queue != "fq" || string(jobs[0].Payload) != `{"n":1}` || strings.Join(jobs[0].Tags, ",") != "f1" || jobs[2].MaxAttempts != 3 {
			t.Errorf("fields not kept: %+v / %+v", jobs[0], jobs[2])
		}

		var page JobsResponse
		e.must("GET", "/v1/jobs?state=blocked&queue=fq", "", 200, &page)
		if len(page.Jobs) != 2 || page.Jobs[0].ID != jobs[2].ID || page.Jobs[1].ID != jobs[1].ID {
			t.Fatalf("blocked listing: %+v", page.Jobs)
		}
		var stats StatsResponse
		e.must("GET", "/v1/stats", "", 200, &stats)
		if stats.Queues["fq"][readpast.StateBlocked] != 2 || stats.Totals[readpast.StateBlocked] != 2 {
			t.Errorf("stats count %d blocked in fq, %d in all; want 2", stats.Queues["fq"][readpast.StateBlocked], stats.Totals[readpast.StateBlocked])
		}

		// Only the pending ones are claimed.
		c := e.claim(`{"worker":"w","queues":["fq"],"limit":10,"lease_seconds":60}`)
		if len(c) != 2 {
			t.Fatalf("claimed %d jobs, want the prior job and extract", len(c))
		}
		for _, j := range c {
			e.must("POST", "/v1/jobs/"+itoa(j.ID)+"/complete", `{"token":"`+j.Token+`"}`, 200, nil)
		}
		if got := e.get(jobs[1].ID).State; got != readpast.StatePending {
			t.Fatalf("render after extract succeeded: %s, want pending", got)
		}
		if got := e.get(jobs[2].ID).State; got != readpast.StateBlocked {
			t.Fatalf("email before render finished: %s, want blocked", got)
		}
		// A blocked job cannot be run now or retried.
		e.wantError("POST", "/v1/jobs/"+itoa(jobs[2].ID)+"/run", "", 409, CodeInvalidState, "")
		e.wantError("POST", "/v1/jobs/"+itoa(jobs[2].ID)+"/retry", "", 409, CodeInvalidState, "")
		// render fails for good: email runs anyway (run_anyway).
		c = e.claim(`{"worker":"w","queues":["fq"],"limit":10,"lease_seconds":60}`)
		if len(c) != 1 || c[0].ID != jobs[1].ID {
			t.Fatalf("claimed %+v, want render", c)
		}
		e.must("POST", "/v1/jobs/"+itoa(c[0].ID)+"/fail", `{"token":"`+c[0].Token+`","error":"x","discard":true}`, 200, nil)
		if got := e.get(jobs[2].ID).State; got != readpast.StatePending {
			t.Fatalf("email after render failed under run_anyway: %s, want pending", got)
		}

		// cancel_child: cancelling the parent cancels the child.
		f := e.enqueueFlow(`{"jobs":[{"ref":"p","kind":"p","queue":"fq2"},{"kind":"c","queue":"fq2","after":[{"ref":"p"}]}]}`, 2)
		e.must("POST", "/v1/jobs/"+itoa(f[0].ID)+"/cancel", "", 200, nil)
		if got := e.get(f[1].ID); got.State != readpast.StateCancelled || len(got.Errors) == 0 {
			t.Fatalf("child of a cancelled parent: %s %+v, want cancelled with an error", got.State, got.Errors)
		}
		// A blocked job may be cancelled by hand, and by a bulk cancel.
		g := e.enqueueFlow(`{"jobs":[{"ref":"p","kind":"p","queue":"fq3"},{"kind":"c","queue":"fq3","after":[{"ref":"p"}]},{"kind":"d","queue":"fq3","after":[{"ref":"p"}]}]}`, 3)
		e.must("POST", "/v1/jobs/"+itoa(g[1].ID)+"/cancel", "", 200, nil)
		var bulk BulkResponse
		e.must("POST", "/v1/bulk/cancel", `{"queue":"fq3","state":"blocked"}`, 200, &bulk)
		if bulk.Count != 1 || e.get(g[2].ID).State != readpast.StateCancelled || e.get(g[0].ID).State != readpast.StatePending {
			t.Errorf("bulk cancel of the blocked jobs of fq3: %+v", bulk)
		}
	})
}

// TestFlowRejectsBadInput: every malformed flow is refused with the field
// at fault, and nothing of it is stored.
func TestFlowRejectsBadInput(t *testing.T) {
	flowStores(t, func(t *testing.T, e *testEnv) {
		done := e.enqueue(`{"kind":"done","queue":"bad"}`)
		e.must("POST", "/v1/jobs/"+itoa(done.ID)+"/cancel", "", 200, nil)
		for _, tc := range []struct {
			body          string
			status        int
			code, field   string
			wantInMessage string
		}{
			{``, 400, CodeMalformedJSON, "", ""},
			{`[]`, 400, CodeMalformedJSON, "", ""},
			{`{}`, 400, CodeInvalidField, "jobs", ""},
			{`{"jobs":[]}`, 400, CodeInvalidField, "jobs", ""},
			{`{"jobs":{}}`, 400, CodeInvalidField, "jobs", ""},
			{`{"jobs":[{"kind":"a"}],"extra":1}`, 400, CodeInvalidField, "extra", ""},
			{`{"jobs":[{"kind":"a"},{"kind":"b","nope":1}]}`, 400, CodeInvalidField, "jobs[1].nope", ""},
			{`{"jobs":[{"kind":"a"},{"kind":"b","unique_key":"k"}]}`, 400, CodeInvalidField, "jobs[1].unique_key", ""},
			{`{"jobs":[{"kind":"a","unique_for_seconds":5}]}`, 400, CodeInvalidField, "jobs[0].unique_for_seconds", ""},
			{`{"jobs":[{"kind":"a","priority":"x"}]}`, 400, CodeInvalidField, "jobs[0].priority", ""},
			{`{"jobs":[{"kind":"a","priority":5000}]}`, 400, CodeInvalidField, "jobs[0].priority", ""},
			{`{"jobs":[{"kind":""}]}`, 400, CodeInvalidField, "jobs[0].kind", ""},
			{`{"jobs":["x"]}`, 400, CodeInvalidField, "jobs[0]", ""},
			{`{"jobs":[{"kind":"a","ref":""}]}`, 400, CodeInvalidField, "jobs[0].ref", ""},
			{`{"jobs":[{"kind":"a","ref":"has space"}]}`, 400, CodeInvalidField, "jobs[0].ref", ""},
			{`{"jobs":[{"kind":"a","ref":"x"},{"kind":"b","ref":"x"}]}`, 400, CodeInvalidField, "jobs[1].ref", ""},
			{`{"jobs":[{"kind":"a","after":{}}]}`, 400, CodeInvalidField, "jobs[0].after", ""},
			{`{"jobs":[{"kind":"a","after":[1]}]}`, 400, CodeInvalidField, "jobs[0].after[0]", ""},
			{`{"jobs":[{"kind":"a","after":[{}]}]}`, 400, CodeInvalidField, "jobs[0].after[0]", ""},
			{`{"jobs":[{"kind":"a","after":[{"ref":"z"}]}]}`, 400, CodeInvalidField, "jobs[0].after[0].ref", ""},
			{`{"jobs":[{"ref":"a","kind":"a","after":[{"ref":"a"}]}]}`, 400, CodeInvalidField, "jobs[0].after[0].ref", ""},
			{`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a"},{"ref":"a"}]}]}`, 400, CodeInvalidField, "jobs[1].after[1].ref", ""},
			{`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a","job_id":1}]}]}`, 400, CodeInvalidField, "jobs[1].after[0]", ""},
			{`{"jobs":[{"kind":"b","after":[{"job_id":0}]}]}`, 400, CodeInvalidField, "jobs[0].after[0].job_id", ""},
			{`{"jobs":[{"kind":"b","after":[{"job_id":"1"}]}]}`, 400, CodeInvalidField, "jobs[0].after[0].job_id", ""},
			{`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a","policy":"maybe"}]}]}`, 400, CodeInvalidField, "jobs[1].after[0].policy", ""},
			{`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a","policy":""}]}]}`, 400, CodeInvalidField, "jobs[1].after[0].policy", ""},
			{`{"jobs":[{"kind":"b","after":[{"job_id":1,"ref":""}]}]}`, 400, CodeInvalidField, "jobs[0].after[0].ref", ""},
			{`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a","when":"x"}]}]}`, 400, CodeInvalidField, "jobs[1].after[0].when", ""},
			{`{"jobs":[{"ref":"a","kind":"a","after":[{"ref":"b"}]},{"ref":"b","kind":"b","after":[{"ref":"a"}]}]}`, 400, CodeInvalidField, "", "cycle"},
			{`{"jobs":[{"kind":"a","after":[{"job_id":999999}]}]}`, 404, CodeNotFound, "jobs[0].after[0].job_id", "999999"},
			{fmt.Sprintf(`{"jobs":[{"ref":"a","kind":"a"},{"kind":"b","after":[{"ref":"a"},{"job_id":%d}]}]}`, done.ID), 409, CodeInvalidState, "jobs[1].after[1].job_id", itoa(done.ID) + " is cancelled"},
		} {
			status, body := e.do("POST", "/v1/flows", tc.body)
			checkError(t, "POST /v1/flows "+trunc(tc.body), status, body, tc.status, tc.code, tc.field)
			if tc.wantInMessage != "" && !strings.Contains(string(body), tc.wantInMessage) {
				t.Errorf("POST /v1/flows %s: %s does not say %q", trunc(tc.body), body, tc.wantInMessage)
			}
		}
		// Nothing of a refused flow was stored.
		var page JobsResponse
		e.must("GET", "/v1/jobs?limit=1000", "", 200, &page)
		if len(page.Jobs) != 1 {
			t.Errorf("refused flows stored %d jobs", len(page.Jobs)-1)
		}
		// Idempotency-Key is refused, naming the header.
		status, body := e.request(context.Background(), "POST", "/v1/flows", `{"jobs":[{"kind":"a"}]}`, "", "",
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "k1"})
		checkError(t, "POST /v1/flows with Idempotency-Key", status, body, 400, CodeInvalidField, "Idempotency-Key")
		// A malformed traceparent is refused.
		status, body = e.request(context.Background(), "POST", "/v1/flows", `{"jobs":[{"kind":"a"}]}`, "", "",
			map[string]string{"Content-Type": "application/json", "traceparent": "00-bad"})
		checkError(t, "POST /v1/flows with a bad traceparent", status, body, 400, CodeInvalidField, "traceparent")
	})
}

// TestFlowLimits: a flow holds at most the server's batch limit, and at
// most readpast.MaxFlowJobs whatever that limit.
func TestFlowLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBatch = 2 })
	e.enqueueFlow(`{"jobs":[{"kind":"a"},{"kind":"b"}]}`, 2)
	e.wantError("POST", "/v1/flows", `{"jobs":[{"kind":"a"},{"kind":"b"},{"kind":"c"}]}`, 413, CodeBatchTooLarge, "jobs")

	big := newEnv(t, func(c *Config) { c.MaxBatch = 5000; c.MaxBodyBytes = 1 << 20 })
	jobs := strings.TrimSuffix(strings.Repeat(`{"kind":"a"},`, readpast.MaxFlowJobs+1), ",")
	big.wantError("POST", "/v1/flows", `{"jobs":[`+jobs+`]}`, 413, CodeBatchTooLarge, "jobs")
	var tooMany strings.Builder
	tooMany.WriteString(`{"jobs":[{"ref":"p","kind":"p"},{"kind":"c","after":[`)
	for i := range readpast.MaxParents + 1 {
		if i > 0 {
			tooMany.WriteByte(',')
		}
		fmt.Fprintf(&tooMany, `{"job_id":%d}`, i+1)
	}
	tooMany.WriteString(`]}]}`)
	big.wantError("POST", "/v1/flows", tooMany.String(), 400, CodeInvalidField, "jobs[1].after")
}

// TestFlowTraceAndMetrics: a flow's jobs keep the request's trace context,
// count in readpast_jobs_enqueued_total, and with WithTracing get the
// producer spans a batch gets.
func TestFlowTraceAndMetrics(t *testing.T) {
	e := newEnv(t, nil)
	hdr := map[string]string{"Content-Type": "application/json", "traceparent": testTraceparent, "tracestate": testTracestate}
	status, body := e.request(context.Background(), "POST", "/v1/flows",
		`{"jobs":[{"ref":"a","kind":"fk","queue":"mq"},{"kind":"fk","queue":"mq","after":[{"ref":"a"}]}]}`, "", "", hdr)
	if status != http.StatusCreated {
		t.Fatalf("flow: %d %s", status, body)
	}
	var r JobsResponse
	mustUnmarshal(t, body, &r)
	for _, j := range r.Jobs {
		if j.Traceparent != testTraceparent || j.Tracestate != testTracestate {
			t.Errorf("job %d keeps %q %q, want the request's", j.ID, j.Traceparent, j.Tracestate)
		}
	}
	raw := string(e.must("GET", "/metrics", "", 200, nil))
	for _, want := range []string{
		`readpast_jobs_enqueued_total{kind="fk",queue="mq"} 2`,
		`readpast_queue_jobs{queue="mq",state="blocked"} 1`,
		`readpast_http_requests_total{code="201",route="POST /v1/flows"} 1`,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	tr, err := readpast.NewTracing(tp, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: e.store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(WithTracing(h, tr))
	defer srv.Close()
	e.srv = srv
	status, body = e.request(context.Background(), "POST", "/v1/flows",
		`{"jobs":[{"ref":"a","kind":"fk","queue":"tq"},{"kind":"fk","queue":"tq","after":[{"ref":"a"}]}]}`, "", "", hdr)
	if status != http.StatusCreated {
		t.Fatalf("traced flow: %d %s", status, body)
	}
	mustUnmarshal(t, body, &r)
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
	}
	if names["send tq"] != 1 || names["create tq"] != 2 {
		t.Errorf("spans %v, want one send tq and two create tq", names)
	}
	for _, j := range r.Jobs {
		if j.Traceparent == "" || j.Traceparent == testTraceparent {
			t.Errorf("traced job %d keeps %q, want its create span's context", j.ID, j.Traceparent)
		}
	}
}

// TestParseFlow: the exported parser checks as the server does.
func TestParseFlow(t *testing.T) {
	flow, err := ParseFlow([]byte(`{"jobs":[{"ref":"a","kind":"k"},{"kind":"k","after":[{"ref":"a","policy":"hold_child"},{"job_id":7}]}]}`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(flow) != 2 || flow[1].After[0].Policy != readpast.HoldChild || flow[1].After[1].JobID != 7 ||
		flow[1].After[1].Policy != readpast.CancelChild || !flow[0].Job.RunAt.IsZero() {
		t.Errorf("parsed %+v", flow)
	}
	if _, err := ParseFlow([]byte(`{"jobs":[{"kind":"k","after":[{"ref":"b"}]}]}`), time.Now()); err == nil ||
		!strings.Contains(err.Error(), "jobs[0].after[0].ref") {
		t.Errorf("unknown ref: %v", err)
	}
}
