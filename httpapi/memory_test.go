package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// heapPeak samples the heap's object bytes while fn runs and returns the
// largest growth over what was in use before.
func heapPeak(fn func()) uint64 {
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { rtmetrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestResponseMemoryBounded: listing and claiming big jobs holds about one
// response budget in memory, not the whole page. Before the budget, three
// GET /v1/jobs?limit=100 and a claim of 100, of 12 jobs of 3 MB, grew the
// heap by 213 MiB (48 MiB with it): each loaded and encoded all 36 MB at
// once, in several copies.
func TestResponseMemoryBounded(t *testing.T) {
	const jobs, size = 12, 3 << 20
	e := newEnv(t, nil)
	payload := `"` + strings.Repeat("x", size) + `"`
	for range jobs {
		if _, err := e.store.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "big", Payload: json.RawMessage(payload)}}); err != nil {
			t.Fatal(err)
		}
	}
	payload = ""
	// Read responses without holding them: the test's own copies would
	// count too.
	get := func(method, path, body string) (status int, n int64, next string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, stringsReader(body))
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, 0, ""
		}
		defer resp.Body.Close()
		// The cursor comes last: keep only the tail.
		var tail tailWriter
		n, _ = io.Copy(&tail, resp.Body)
		if i := strings.LastIndex(string(tail.b), `"next_cursor":`); i >= 0 {
			next = strings.Trim(string(tail.b[i+len(`"next_cursor":`):]), "\"}\n")
		}
		return resp.StatusCode, n, next
	}
	var listed, claimed int64
	var next string
	grew := heapPeak(func() {
		for range 3 {
			var status int
			status, listed, next = get("GET", "/v1/jobs?limit=100", "")
			if status != 200 {
				t.Errorf("list: %d", status)
			}
		}
		var status int
		status, claimed, _ = get("POST", "/v1/claim", `{"worker":"w","limit":100}`)
		if status != 200 {
			t.Errorf("claim: %d", status)
		}
	})
	t.Logf("heap grew by %d MiB; list sent %d MiB (next cursor %q), claim %d MiB", grew>>20, listed>>20, next, claimed>>20)
	if listed > DefaultMaxResponseBytes+size || claimed > DefaultMaxResponseBytes+size {
		t.Errorf("responses of %d and %d bytes, over the budget of %d", listed, claimed, DefaultMaxResponseBytes)
	}
	if next == "" || next == "null" {
		t.Errorf("a list cut short by the budget has no next cursor")
	}
	// Generous: a page, its encoding and the response, with GC slack.
	if limit := uint64(12 * DefaultMaxResponseBytes); grew > limit {
		t.Errorf("heap grew by %d MiB, want at most %d MiB", grew>>20, limit>>20)
	}
}

// tailWriter keeps the last 256 bytes written to it.
type tailWriter struct{ b []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > 256 {
		w.b = append(w.b[:0], w.b[len(w.b)-256:]...)
	}
	return len(p), nil
}

// TestListBudget: a list that reaches the byte budget returns fewer jobs
// and a cursor, and paging from it visits every job once, in order; a
// summary leaves out payloads, so more fit.
func TestListBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 4 << 10; c.MaxResponseBytes = 10 << 10 })
	body := `{"kind":"k","payload":"` + strings.Repeat("p", 1000) + `"}`
	var ids []int64
	for range 30 {
		ids = append([]int64{e.enqueue(body).ID}, ids...) // newest first
	}
	var seen []int64
	path := "/v1/jobs?limit=100"
	for page := 0; ; page++ {
		var r struct {
			Jobs       []Job   `json:"jobs"`
			NextCursor *string `json:"next_cursor"`
		}
		raw := e.must("GET", path, "", 200, &r)
		if len(raw) > 10<<10 {
			t.Errorf("page %d is %d bytes, over the budget", page, len(raw))
		}
		if page == 0 && (len(r.Jobs) == 0 || len(r.Jobs) >= 30 || r.NextCursor == nil) {
			t.Fatalf("first page: %d jobs, next %v", len(r.Jobs), r.NextCursor)
		}
		for _, j := range r.Jobs {
			seen = append(seen, j.ID)
			if len(j.Payload) < 1000 {
				t.Fatalf("job %d without its payload", j.ID)
			}
		}
		if r.NextCursor == nil {
			break
		}
		if page > 30 {
			t.Fatal("paging does not end")
		}
		path = "/v1/jobs?limit=100&cursor=" + *r.NextCursor
	}
	if fmt.Sprint(seen) != fmt.Sprint(ids) {
		t.Errorf("paging saw %v, want %v", seen, ids)
	}
	var sum struct {
		Jobs       []map[string]any `json:"jobs"`
		NextCursor *string          `json:"next_cursor"`
	}
	e.must("GET", "/v1/jobs?limit=100&summary=true", "", 200, &sum)
	if len(sum.Jobs) != 30 || sum.NextCursor != nil {
		t.Fatalf("summary listing: %d jobs, next %v", len(sum.Jobs), sum.NextCursor)
	}
	for _, k := range []string{"payload", "result", "errors"} {
		if _, ok := sum.Jobs[0][k]; ok {
			t.Errorf("a summary has %s: %v", k, sum.Jobs[0])
		}
	}
	// A job larger than the budget still comes, alone.
	big := e.enqueue(`{"kind":"k","payload":"` + strings.Repeat("b", 3000) + `"}`)
	e2 := newEnvOn(t, e.store, func(c *Config) { c.MaxBodyBytes = 4 << 10; c.MaxResponseBytes = 2 << 10 })
	var one JobsResponse
	e2.must("GET", "/v1/jobs?limit=5", "", 200, &one)
	if len(one.Jobs) != 1 || one.Jobs[0].ID != big.ID {
		t.Errorf("over-budget list = %d jobs", len(one.Jobs))
	}
}

// TestClaimBudget: a claim that reaches the budget returns fewer jobs; the
// ones it took that did not fit are pending again with no attempt used,
// and nothing is lost.
func TestClaimBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxBodyBytes = 4 << 10; c.MaxResponseBytes = 10 << 10 })
	body := `{"kind":"k","queue":"cb","payload":"` + strings.Repeat("p", 1000) + `"}`
	for range 30 {
		e.enqueue(body)
	}
	got := map[int64]bool{}
	for round := 0; len(got) < 30; round++ {
		jobs := e.claim(`{"worker":"w","queues":["cb"],"limit":30}`)
		if round == 0 && (len(jobs) == 0 || len(jobs) >= 30) {
			t.Fatalf("first claim took %d jobs", len(jobs))
		}
		if len(jobs) == 0 || round > 30 {
			t.Fatalf("claims stalled with %d of 30 jobs", len(got))
		}
		for _, j := range jobs {
			if got[j.ID] || j.Token == "" || j.Attempt != 1 {
				t.Fatalf("claimed %+v (seen: %v)", j, got[j.ID])
			}
			got[j.ID] = true
		}
	}
	stats := map[readpast.JobState]int64{}
	st, err := e.store.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		stats[s.State] += s.Count
	}
	if stats[readpast.StateRunning] != 30 || stats[readpast.StatePending] != 0 {
		t.Errorf("after claiming everything: %v", stats)
	}
}

// TestWriteTimeout: a client that does not read its response is cut off
// after the write timeout, while a long poll longer than that is answered.
func TestWriteTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond; c.MaxResponseBytes = 64 << 20 })
	payload := `"` + strings.Repeat("x", 2<<20) + `"`
	for range 6 {
		if _, err := e.store.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "big", Queue: "slow", Payload: json.RawMessage(payload)}}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/jobs?queue=slow&limit=6 HTTP/1.1\r\nHost: localhost\r\n\r\n")
	time.Sleep(time.Second) // read nothing meanwhile
	// Connection: keep-alive; the read deadline ends the copy if the
	// server keeps the connection open after writing it all.
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, conn)
	t.Logf("a client that read only after 1 s got %d MiB", n>>20)
	if n >= 10<<20 {
		t.Errorf("a client that did not read got all %d bytes after the write timeout", n)
	}

	start := time.Now()
	if jobs := e.claim(`{"worker":"w","queues":["none"],"wait_seconds":0.8}`); len(jobs) != 0 {
		t.Fatalf("claimed %v", jobs)
	}
	if d := time.Since(start); d < 700*time.Millisecond {
		t.Errorf("the long poll ended after %v", d)
	}
}
