package httpapi

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestJobHasOneJSONShape checks that the API's job is readpast.Job's own
// JSON form: the same keys and values, with only the claim token added.
func TestJobHasOneJSONShape(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	g := "g"
	j := &readpast.Job{
		ID: 7, Queue: "q", Kind: "k", Payload: json.RawMessage(`{"a":1}`), Priority: 3,
		State: readpast.StateRunning, Attempt: 1, MaxAttempts: 5, RunAt: at, Group: &g,
		Token: "secret", LeaseExpiresAt: &at, Worker: "w", CreatedAt: at, StartedAt: &at,
		Errors: []readpast.AttemptError{{Attempt: 1, Message: "boom", At: at}}, Result: json.RawMessage(`1`),
		UniqueKey: "u", UniqueUntil: &at, Duplicate: true, Tags: []string{"t1", "t2"}, Snoozes: 2,
	}
	decode := func(v any) map[string]any {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := decode(j)
	w := NewJob(j)
	if got := decode(w); !maps.EqualFunc(got, want, func(a, b any) bool { return mustJSON(t, a) == mustJSON(t, b) }) {
		t.Fatalf("wire job %v\nreadpast.Job %v", got, want)
	}
	w.Token = "tok"
	got := decode(w)
	if got["token"] != "tok" {
		t.Fatalf("claim token not sent: %v", got)
	}
	delete(got, "token")
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("keys %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if _, leaked := decode(NewJob(j))["token"]; leaked {
		t.Fatal("a stored job's token reached its wire form")
	}
}
