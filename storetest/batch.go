package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testEnqueueLargeBatch: a large batch (the size that PostgreSQL writes
// with COPY) keeps every option of every job, as Get reads it back, with
// ascending ids in input order, counted per queue, its tags listed, and
// claimed in claim order; the same batch in the caller's transaction
// exists only if that commits.
func testEnqueueLargeBatch(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	const n = 1500
	later := time.Now().Add(time.Hour).Round(time.Second)
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		p := readpast.EnqueueParams{Kind: fmt.Sprint("k", i%3), Queue: []string{"a", "b", "c"}[i%3],
			Payload: json.RawMessage(fmt.Sprintf(`{"i":%d,"s":"x"}`, i)), Priority: i % 5, MaxAttempts: 1 + i%4}
		if i%7 == 0 {
			p.RunAt = later.Add(time.Duration(i) * time.Microsecond)
		}
		if i%10 == 0 {
			p.Tags = []string{"big", fmt.Sprint("t", i%20)}
		}
		ps[i] = p
	}
	jobs := enqueue(t, s, ps...)
	if len(jobs) != n {
		t.Fatalf("enqueued %d, want %d", len(jobs), n)
	}
	due := map[string]int{}
	for i, j := range jobs {
		if i > 0 && j.ID <= jobs[i-1].ID {
			t.Fatalf("ids not increasing in input order: %d after %d", j.ID, jobs[i-1].ID)
		}
		g := get(t, s, j.ID)
		if !jsonEqual(j.Payload, g.Payload) || !jsonEqual(j.Payload, ps[i].Payload) {
			t.Fatalf("job %d: payload %s returned, %s stored, %s given", i, j.Payload, g.Payload, ps[i].Payload)
		}
		rj, gj := *j, *g
		rj.Payload, gj.Payload = nil, nil
		if !reflect.DeepEqual(rj, gj) {
			t.Fatalf("job %d: enqueue returned\n%+v\nGet reads\n%+v", i, rj, gj)
		}
		if j.Queue != ps[i].Queue || j.Kind != ps[i].Kind || j.Priority != ps[i].Priority || j.MaxAttempts != ps[i].MaxAttempts ||
			j.State != readpast.StatePending || j.Attempt != 0 || !slices.Equal(j.Tags, append([]string{}, ps[i].Tags...)) {
			t.Fatalf("job %d: options not kept: %+v for %+v", i, j, ps[i])
		}
		if ps[i].RunAt.IsZero() {
			if j.RunAt.After(j.CreatedAt) || j.CreatedAt.Sub(j.RunAt) > time.Minute {
				t.Fatalf("job %d due now: run-at %v, created %v", i, j.RunAt, j.CreatedAt)
			}
			due[j.Queue]++
		} else if !j.RunAt.Equal(ps[i].RunAt.Truncate(time.Microsecond)) {
			t.Fatalf("job %d: run-at %v, want %v", i, j.RunAt, ps[i].RunAt)
		}
	}
	counts := map[string]int64{}
	for _, st := range ok(s.Stats(ctx)).must(t) {
		counts[st.Queue+"/"+string(st.State)] += st.Count
	}
	for _, q := range []string{"a", "b", "c"} {
		if counts[q+"/pending"] != n/3 {
			t.Fatalf("stats: queue %s has %d pending, want %d (%v)", q, counts[q+"/pending"], n/3, counts)
		}
	}
	if got := listAll(t, s, readpast.ListParams{Tag: "big"}); len(got) != n/10 {
		t.Fatalf("tag big lists %d jobs, want %d", len(got), n/10)
	}
	// Claimed in claim order: priority, run-at, id.
	cs := claim(t, s, n, time.Minute, "a")
	if len(cs) != due["a"] {
		t.Fatalf("claimed %d of queue a, want its %d due jobs", len(cs), due["a"])
	}
	for i := 1; i < len(cs); i++ {
		p, c := cs[i-1], cs[i]
		if p.Priority > c.Priority || (p.Priority == c.Priority && (p.RunAt.After(c.RunAt) || (p.RunAt.Equal(c.RunAt) && p.ID > c.ID))) {
			t.Fatalf("claim order broken: %d (prio %d, %v) before %d (prio %d, %v)", p.ID, p.Priority, p.RunAt, c.ID, c.Priority, c.RunAt)
		}
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
