package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func testEnqueueBatch(t *testing.T, h Harness) {
	s := newStore(t, h)
	const n = 10000
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	jobs := enqueue(t, s, ps...)
	if len(jobs) != n {
		t.Fatalf("enqueued %d, want %d", len(jobs), n)
	}
	for i, j := range jobs {
		var p struct{ I int }
		if err := json.Unmarshal(j.Payload, &p); err != nil || p.I != i {
			t.Fatalf("job %d: payload %s, want i=%d (order kept)", i, j.Payload, i)
		}
		if i > 0 && j.ID <= jobs[i-1].ID {
			t.Fatalf("ids not increasing in input order: %d after %d", j.ID, jobs[i-1].ID)
		}
		if j.State != readpast.StatePending || j.Queue != readpast.DefaultQueue || j.MaxAttempts != readpast.DefaultMaxAttempts || j.Attempt != 0 {
			t.Fatalf("job %d: defaults not applied: %+v", i, j)
		}
	}
	g := get(t, s, jobs[n-1].ID)
	if string(g.Payload) != fmt.Sprintf(`{"i": %d}`, n-1) && string(g.Payload) != fmt.Sprintf(`{"i":%d}`, n-1) {
		t.Fatalf("get payload %s", g.Payload)
	}
	if g.Errors == nil {
		t.Fatal("errors must be an empty list, not nil")
	}
	grp := "g1"
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "x", Queue: "q2", Priority: -5, MaxAttempts: 3, Group: grp, RunAt: time.Now().Add(time.Hour)})[0]
	g = get(t, s, j.ID)
	if g.Queue != "q2" || g.Priority != -5 || g.MaxAttempts != 3 || g.Group == nil || *g.Group != grp || time.Until(g.RunAt) < 59*time.Minute {
		t.Fatalf("options not stored: %+v", g)
	}
}

func testEnqueueInvalid(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	bad := []readpast.EnqueueParams{
		{Kind: ""},
		{Kind: "k", Payload: json.RawMessage(`{not json`)},
		{Kind: "k", Priority: readpast.MaxPriority + 1},
		{Kind: "k", MaxAttempts: -1},
		{Kind: "k", Queue: "has space"},
		{Kind: "k", Group: string(make([]byte, readpast.MaxNameLen+1))},
	}
	for i, b := range bad {
		_, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "ok"}, b})
		var fe *readpast.FieldError
		if !errors.Is(err, readpast.ErrInvalid) || !errors.As(err, &fe) || fe.Field == "" {
			t.Fatalf("bad job %d: got %v, want a FieldError", i, err)
		}
	}
	res := ok(s.List(ctx, readpast.ListParams{})).must(t)
	if len(res.Jobs) != 0 {
		t.Fatalf("a rejected batch left %d jobs behind", len(res.Jobs))
	}
	if _, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: -1, Lease: time.Second}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("claim limit -1: %v", err)
	}
	if _, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("claim without lease: %v", err)
	}
}

func testClaimOrder(t *testing.T, h Harness) {
	s := newStore(t, h)
	now := time.Now()
	// Enqueued out of order; expected claim order is priority, run_at, id.
	jobs := enqueue(t, s,
		readpast.EnqueueParams{Kind: "a", Priority: 5, RunAt: now.Add(-1 * time.Minute)},               // 0
		readpast.EnqueueParams{Kind: "b", Priority: 1, RunAt: now.Add(-1 * time.Minute)},               // 1
		readpast.EnqueueParams{Kind: "c", Priority: 1, RunAt: now.Add(-3 * time.Minute)},               // 2
		readpast.EnqueueParams{Kind: "d", Priority: 1, RunAt: now.Add(-3 * time.Minute)},               // 3
		readpast.EnqueueParams{Kind: "e", Priority: -2, RunAt: now},                                    // 4
		readpast.EnqueueParams{Kind: "f", Priority: 5, RunAt: now.Add(-2 * time.Minute)},               // 5
		readpast.EnqueueParams{Kind: "g", Priority: 1, RunAt: now.Add(-1 * time.Minute), Group: "grp"}, // 6
	)
	want := []int64{jobs[4].ID, jobs[2].ID, jobs[3].ID, jobs[1].ID, jobs[6].ID, jobs[5].ID, jobs[0].ID}
	var got []int64
	for range want {
		c := claim(t, s, 1, time.Minute)
		if len(c) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(c))
		}
		got = append(got, c[0].ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("one at a time: claim order %v, want %v", got, want)
	}
	// A batch claim returns the same order.
	s2 := newStore(t, h)
	jobs = enqueue(t, s2,
		readpast.EnqueueParams{Kind: "a", Priority: 3},
		readpast.EnqueueParams{Kind: "b", Priority: 1, Group: "x"},
		readpast.EnqueueParams{Kind: "c", Priority: 2},
		readpast.EnqueueParams{Kind: "d", Priority: 1},
	)
	c := claim(t, s2, 10, time.Minute)
	if got, want := fmt.Sprint(ids(c)), fmt.Sprint([]int64{jobs[1].ID, jobs[3].ID, jobs[2].ID, jobs[0].ID}); got != want {
		t.Fatalf("batch claim order %v, want %v", got, want)
	}
	for _, j := range c {
		if j.State != readpast.StateRunning || j.Attempt != 1 || j.Token == "" || j.LeaseExpiresAt == nil || j.StartedAt == nil || j.Worker == "" {
			t.Fatalf("claimed job not marked running with token, lease, worker: %+v", j)
		}
		// What the claim returns is the job as stored, field for field
		// (the PostgreSQL claim leaves out of its rows what it set on
		// every job alike, and the store fills it in).
		stored := get(t, s2, j.ID)
		claimed, _ := json.Marshal(j)
		read, _ := json.Marshal(stored)
		if string(claimed) != string(read) || j.Token != stored.Token {
			t.Fatalf("claim returned\n%s (token %s), the store holds\n%s (token %s)", claimed, j.Token, read, stored.Token)
		}
	}
	// One claim, one token (the seeds' marker): every job of the call
	// carries it, and the next call gets another.
	for _, j := range c {
		if j.Token != c[0].Token {
			t.Fatalf("jobs of one claim carry tokens %s and %s", c[0].Token, j.Token)
		}
	}
	enqueue(t, s2, readpast.EnqueueParams{Kind: "e"})
	if next := claim(t, s2, 1, time.Minute); len(next) != 1 || next[0].Token == c[0].Token {
		t.Fatalf("a second claim reused the first one's token: %+v", next)
	}
}

func testRunAtNotEarly(t *testing.T, h Harness) {
	s := newStore(t, h)
	later := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(700 * time.Millisecond)})[0]
	far := enqueue(t, s, readpast.EnqueueParams{Kind: "k", RunAt: time.Now().Add(time.Hour), Priority: -100})[0]
	if c := claim(t, s, 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v before run_at", ids(c))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := claim(t, s, 10, time.Minute)
		if len(c) == 1 {
			if c[0].ID != later.ID {
				t.Fatalf("claimed %d, want %d", c[0].ID, later.ID)
			}
			if time.Now().Before(later.RunAt) {
				t.Fatalf("claimed at %v, before run_at %v", time.Now(), later.RunAt)
			}
			break
		}
		if len(c) > 1 || time.Now().After(deadline) {
			t.Fatalf("claimed %v; want job %d once run_at passed", ids(c), later.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantState(t, s, far.ID, readpast.StatePending)
}

func testClaimQueues(t *testing.T, h Harness) {
	s := newStore(t, h)
	a := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "a", Priority: 2})[0]
	b := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "b", Priority: 1})[0]
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "c"})
	if c := claim(t, s, 10, time.Minute, "zzz"); len(c) != 0 {
		t.Fatalf("claimed %v from an empty queue", ids(c))
	}
	c := claim(t, s, 10, time.Minute, "a", "b")
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{b.ID, a.ID}) {
		t.Fatalf("claimed %v from queues a,b; want [%d %d]", ids(c), b.ID, a.ID)
	}
}
