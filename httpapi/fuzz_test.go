package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// The fuzz targets check that request decoding never panics, that every
// rejection is a 4xx naming a code, and that what it accepts is valid. Their
// seeds (below and in testdata/fuzz) run as normal tests under go test.

var fuzzNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// checkRejection requires ae to be a well-formed 4xx.
func checkRejection(t *testing.T, ae *apiError) {
	t.Helper()
	if ae.Status < 400 || ae.Status > 499 {
		t.Fatalf("status %d for %v", ae.Status, ae)
	}
	if ae.Code == "" || ae.Message == "" {
		t.Fatalf("rejection without code or message: %#v", ae)
	}
	if ae.Code == CodeInvalidField && ae.Field == "" && ae.Status == http.StatusBadRequest && !strings.Contains(ae.Message, "query") {
		t.Fatalf("invalid_field without a field: %#v", ae)
	}
}

// checkEnqueueParams requires p to be normalized and valid.
func checkEnqueueParams(t *testing.T, p readpast.EnqueueParams) {
	t.Helper()
	again, err := p.Normalize(fuzzNow)
	if err != nil {
		t.Fatalf("accepted params fail Normalize: %v (%+v)", err, p)
	}
	if again.Queue != p.Queue || again.MaxAttempts != p.MaxAttempts || !bytes.Equal(again.Payload, p.Payload) {
		t.Fatalf("accepted params not normalized: %+v vs %+v", p, again)
	}
	if !json.Valid(p.Payload) {
		t.Fatalf("accepted invalid payload %q", p.Payload)
	}
}

var enqueueSeeds = []string{
	`{"kind":"email","payload":{"to":"a@b.c"},"queue":"mail","priority":-5,"run_at":"2025-01-02T15:04:05Z","max_attempts":3,"group":"u1"}`,
	`{"kind":"k"}`,
	`{"kind":"k","payload":null,"group":null,"run_at":null}`,
	`{"kind":"k","payload":[1,2,{"a":"\u00e9"}]}`,
	`{"kind":"k","priority":1e40}`,
	`{"kind":"k","max_attempts":0}`,
	`{"kind":"k","run_at":"0000-01-01T00:00:00Z"}`,
	`{"kind":"k","extra":true}`,
	`{"kind":"a b"}`,
	`{"kind":"k"} trailing`,
	`[]`,
	`null`,
	``,
	"{\"kind\":\"\xff\"}",
	`{"kind":"k","payload":1e999999}`,
}

func FuzzDecodeEnqueue(f *testing.F) {
	for _, s := range enqueueSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, ae := decodeEnqueue(body, fuzzNow)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		checkEnqueueParams(t, p)
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"jobs":[{"kind":"a"},{"kind":"b","payload":[1],"queue":"q","group":"g"}]}`))
	f.Add([]byte(`{"jobs":[]}`))
	f.Add([]byte(`{"jobs":[1,2]}`))
	f.Add([]byte(`{"jobs":[{"kind":"a"},{"kind":"b","priority":"x"}]}`))
	f.Add([]byte(`{"jobs":[{"kind":"a"},{"kind":"a"},{"kind":"a"},{"kind":"a"}]}`))
	f.Add([]byte(`{"jobs":null,"more":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ps, ae := decodeBatch(body, fuzzNow, 3)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if len(ps) == 0 || len(ps) > 3 {
			t.Fatalf("accepted a batch of %d", len(ps))
		}
		for _, p := range ps {
			checkEnqueueParams(t, p)
		}
	})
}

func FuzzDecodeClaim(f *testing.F) {
	f.Add([]byte(`{"worker":"w1","queues":["a","b"],"limit":10,"lease_seconds":30,"wait_seconds":20}`))
	f.Add([]byte(`{"worker":"w"}`))
	f.Add([]byte(`{"worker":"w","lease_seconds":0.0001}`))
	f.Add([]byte(`{"worker":"w","wait_seconds":1e308}`))
	f.Add([]byte(`{"worker":"w","limit":-1}`))
	f.Add([]byte(`{"worker":"w","queues":[""]}`))
	f.Add([]byte(`{"queues":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, ae := decodeClaim(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if _, err := args.Params.Normalize(); err != nil {
			t.Fatalf("accepted claim fails Normalize: %v", err)
		}
		if args.Wait < 0 || args.Wait > MaxWaitSeconds*time.Second {
			t.Fatalf("accepted wait %v", args.Wait)
		}
	})
}

func FuzzDecodeComplete(f *testing.F) {
	f.Add([]byte(`{"token":"abc","result":{"sum":3}}`))
	f.Add([]byte(`{"token":"abc","result":null}`))
	f.Add([]byte(`{"token":""}`))
	f.Add([]byte(`{"result":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ae := decodeComplete(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if req.Token == "" || len(req.Token) > MaxTokenLen {
			t.Fatalf("accepted token %q", req.Token)
		}
		if len(req.Result) > 0 && !json.Valid(req.Result) {
			t.Fatalf("accepted invalid result %q", req.Result)
		}
	})
}

func FuzzDecodeFail(f *testing.F) {
	f.Add([]byte(`{"token":"abc","error":"boom"}`))
	f.Add([]byte(`{"token":"abc","error":"boom","stack":"s","retry_at":"2030-01-01T00:00:00Z","discard":false}`))
	f.Add([]byte(`{"token":"abc","error":"","discard":true}`))
	f.Add([]byte(`{"token":"abc"}`))
	f.Add([]byte(`{"token":"abc","error":"x","retry_at":"99999-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		args, ae := decodeFail(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if args.Token == "" {
			t.Fatal("accepted an empty token")
		}
		if !args.RetryAt.IsZero() && (args.RetryAt.Year() < 1970 || args.RetryAt.Year() > 9999) {
			t.Fatalf("accepted retry_at %v", args.RetryAt)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add([]byte(`{"token":"abc","lease_seconds":60}`))
	f.Add([]byte(`{"token":"abc"}`))
	f.Add([]byte(`{"token":"abc","lease_seconds":-1}`))
	f.Add([]byte(`{"token":"abc","lease_seconds":86400.5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		token, lease, ae := decodeHeartbeat(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if token == "" {
			t.Fatal("accepted an empty token")
		}
		if err := readpast.CheckLease(lease); err != nil {
			t.Fatalf("accepted lease %v: %v", lease, err)
		}
	})
}

func FuzzDecodeRelease(f *testing.F) {
	f.Add([]byte(`{"token":"abc"}`))
	f.Add([]byte(`{"token":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		token, ae := decodeRelease(body)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if token == "" {
			t.Fatal("accepted an empty token")
		}
	})
}

// FuzzDecodeEmpty covers the bodies of cancel and retry.
func FuzzDecodeEmpty(f *testing.F) {
	f.Add([]byte(``))
	f.Add([]byte(`{}`))
	f.Add([]byte(` { } `))
	f.Add([]byte(`{"x":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if ae := decodeEmpty(body); ae != nil {
			checkRejection(t, ae)
		}
	})
}

func FuzzDecodeListQuery(f *testing.F) {
	f.Add("queue=q&state=pending&kind=k&group=g&limit=10&cursor=5")
	f.Add("")
	f.Add("limit=0")
	f.Add("state=nope")
	f.Add("cursor=-1")
	f.Add("queue=%zz")
	f.Add("x=1&x=2")
	f.Add("summary=true&limit=5")
	f.Add("summary=yes")
	f.Fuzz(func(t *testing.T, query string) {
		args, ae := decodeListQuery(query)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if _, err := args.Params.Normalize(); err != nil {
			t.Fatalf("accepted list fails Normalize: %v", err)
		}
	})
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "abc", "9223372036854775807", "9223372036854775808", "+5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ae := parseID(s)
		if ae != nil {
			checkRejection(t, ae)
			return
		}
		if id < 1 {
			t.Fatalf("accepted id %d", id)
		}
	})
}

// FuzzHandler drives the whole handler, on a real SQLite store, with any
// method, path and body: it must never panic nor answer 5xx, and every
// response must be JSON (except /metrics).
func FuzzHandler(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"a","payload":{"x":1}}`},
		{"POST", "/v1/jobs/batch", `{"jobs":[{"kind":"a"},{"kind":"b"}]}`},
		{"POST", "/v1/claim", `{"worker":"w","limit":5}`},
		{"POST", "/v1/jobs/1/complete", `{"token":"t","result":1}`},
		{"POST", "/v1/jobs/1/fail", `{"token":"t","error":"e"}`},
		{"POST", "/v1/jobs/1/heartbeat", `{"token":"t"}`},
		{"POST", "/v1/jobs/1/release", `{"token":"t"}`},
		{"POST", "/v1/jobs/1/cancel", ``},
		{"POST", "/v1/jobs/1/retry", `{}`},
		{"GET", "/v1/jobs/1", ``},
		{"GET", "/v1/jobs?state=pending&limit=3", ``},
		{"GET", "/v1/stats", ``},
		{"GET", "/readyz", ``},
		{"DELETE", "/v1/jobs/1", ``},
		{"GET", "/v1/jobs/%00", ``},
		{"PUT", "/v1/limits/customer:*", `{"concurrency":5,"rate":10,"per_seconds":1,"burst":20}`},
		{"GET", "/v1/limits/customer:%2A", ``},
		{"GET", "/v1/limits", ``},
		{"POST", "/v1/limits/customer:1/tokens", `{"n":2}`},
		{"DELETE", "/v1/limits/a%2Fb", ``},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"), sqlite.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = store.Close() })
	h, err := New(Config{Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxBatch: 10, MaxBodyBytes: 64 << 10,
		AllowedHosts: []string{"readpast.test"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://readpast.test"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		// Never long-poll in a fuzz run.
		if bytes.Contains(body, []byte("wait_seconds")) {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", method, path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			var eb ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("%s %s: error body %q", method, path, rec.Body.Bytes())
			}
		}
	})
}
