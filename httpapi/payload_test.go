package httpapi

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/readpast/readpast/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// badPayloads are payloads PostgreSQL's jsonb cannot hold. Before one
// validation was shared by both stores, PostgreSQL answered 500 and SQLite
// stored them.
var badPayloads = []string{
	`{"s":"\u0000"}`,
	`{"s":"\ud800"}`,
	`["\udc00"]`,
	"{\"s\":\"\xff\xfe\"}",
	`{"n":1e131072}`,
	`{"a":1,"b":{"c":2,"c":3}}`, // SQLite would keep both, jsonb the last
}

// TestBadPayloads: a payload or result no store can keep as it is gets a
// 400 naming the field, alone or in one job of a batch, and nothing is
// stored; good edge cases are kept exactly on both stores.
func TestBadPayloads(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { checkBadPayloads(t, newEnv(t, nil)) })
	t.Run("postgres", func(t *testing.T) { checkBadPayloads(t, newPostgresEnv(t, nil)) })
}

func checkBadPayloads(t *testing.T, e *testEnv) {
	for _, p := range badPayloads {
		e.wantError("POST", "/v1/jobs", `{"kind":"x","payload":`+p+`}`, http.StatusBadRequest, CodeInvalidField, "payload")
		e.wantError("POST", "/v1/jobs/batch", `{"jobs":[{"kind":"ok"},{"kind":"x","payload":`+p+`}]}`,
			http.StatusBadRequest, CodeInvalidField, "jobs[1].payload")
	}
	if n := e.total(); n != 0 {
		t.Fatalf("bad payloads stored %d jobs", n)
	}

	// Edge cases that are fine keep their value (PostgreSQL normalizes the
	// text: escapes decoded, numbers written out in full).
	good := `{"s":"\u0001 \ud83d\ude00 é","n":[1e-300,123456789012345678901234567890]}`
	j := e.enqueue(`{"kind":"x","payload":` + good + `}`)
	var back struct {
		S string
		N []json.Number
	}
	got := e.get(j.ID)
	if err := json.Unmarshal(got.Payload, &back); err != nil || back.S != "\x01 😀 é" || len(back.N) != 2 ||
		!strings.HasSuffix(back.N[0].String(), "1e-300") && !strings.HasSuffix(back.N[0].String(), "0001") ||
		back.N[1].String() != "123456789012345678901234567890" {
		t.Errorf("payload came back as %s (%v)", got.Payload, err)
	}

	// Results: the same rules, 400 before the store is asked, and the job
	// stays running under its claim.
	claimed := e.claim(`{"worker":"w"}`)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d jobs", len(claimed))
	}
	c := claimed[0]
	for _, r := range badPayloads {
		e.wantError("POST", "/v1/jobs/"+itoa(c.ID)+"/complete", `{"token":"`+c.Token+`","result":`+r+`}`,
			http.StatusBadRequest, CodeInvalidField, "result")
	}
	if got := e.get(c.ID); got.State != "running" {
		t.Errorf("after rejected results the job is %s", got.State)
	}
	e.must("POST", "/v1/jobs/"+itoa(c.ID)+"/complete", `{"token":"`+c.Token+`","result":{"ok":true}}`, http.StatusOK, nil)
}
