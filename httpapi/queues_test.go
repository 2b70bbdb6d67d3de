package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func TestPauseAndResumeOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	e.enqueue(`{"kind":"a","queue":"q"}`)
	e.enqueue(`{"kind":"a","queue":"r"}`)

	var q Queue
	e.must("POST", "/v1/queues/q/pause", "", http.StatusOK, &q)
	if q.Name != "q" || !q.Paused || q.PausedAt == nil || q.Counts[readpast.StatePending] != 1 {
		t.Fatalf("pause answered %+v", q)
	}
	var c struct{ Jobs []Job }
	e.must("POST", "/v1/claim", `{"worker":"w","queues":["q","r"],"limit":5}`, http.StatusOK, &c)
	if len(c.Jobs) != 1 || c.Jobs[0].Queue != "r" {
		t.Fatalf("claim from a paused and an open queue took %+v, want r's job only", c.Jobs)
	}

	var list QueuesResponse
	e.must("GET", "/v1/queues", "", http.StatusOK, &list)
	if len(list.Queues) != 2 || list.Queues[0].Name != "q" || !list.Queues[0].Paused ||
		list.Queues[1].Name != "r" || list.Queues[1].Paused || list.Queues[1].Counts[readpast.StateRunning] != 1 {
		t.Fatalf("GET /v1/queues: %+v", list)
	}
	var st StatsResponse
	e.must("GET", "/v1/stats", "", http.StatusOK, &st)
	if !slices.Equal(st.Paused, []string{"q"}) {
		t.Fatalf("stats paused = %v, want [q]", st.Paused)
	}

	// A long-polling claim on the paused queue gets its job when the queue
	// is resumed, well before its wait runs out.
	got := make(chan []Job, 1)
	go func() {
		var c struct{ Jobs []Job }
		e.must("POST", "/v1/claim", `{"worker":"w","queues":["q"],"wait_seconds":60}`, http.StatusOK, &c)
		got <- c.Jobs
	}()
	select {
	case jobs := <-got:
		t.Fatalf("a claim on a paused queue returned %+v", jobs)
	case <-time.After(300 * time.Millisecond):
	}
	e.must("POST", "/v1/queues/q/resume", "{}", http.StatusOK, &q)
	if q.Paused || q.PausedAt != nil {
		t.Fatalf("resume answered %+v", q)
	}
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0].Queue != "q" {
			t.Fatalf("after resume the waiting claim got %+v", jobs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting claim did not get the resumed queue's job")
	}
}

func TestPauseRejectsBadInput(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/queues/a%20b/pause", "", "queue"},
		{"/v1/queues/q/pause", `{"until":"tomorrow"}`, "until"},
		{"/v1/queues/q/resume", `[1]`, ""},
	} {
		status, body := e.do("POST", tc.path, tc.body)
		var eb ErrorBody
		if status != http.StatusBadRequest || json.Unmarshal(body, &eb) != nil || eb.Error.Field != tc.field {
			t.Errorf("POST %s %s: %d %s, want 400 naming field %q", tc.path, tc.body, status, body, tc.field)
		}
	}
	var list QueuesResponse
	e.must("GET", "/v1/queues", "", http.StatusOK, &list)
	if len(list.Queues) != 0 {
		t.Fatalf("bad requests changed queues: %+v", list)
	}
	if status, _ := e.do("GET", "/v1/queues/q/pause", ""); status != http.StatusMethodNotAllowed {
		t.Fatalf("GET on pause: %d, want 405", status)
	}
}
