package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestRowsReadIntoJobsOfTheirOwn: a statement's rows are read with one
// reused scanner (jobScanner); each job must keep its own values, not the
// next row's, in every field that is read through a pointer or a byte
// slice (payload, group, token, worker, unique key, tags, times).
func TestRowsReadIntoJobsOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	const n = 5
	params := make([]readpast.EnqueueParams, n)
	for i := range params {
		params[i] = readpast.EnqueueParams{Kind: "k", Payload: []byte(fmt.Sprintf(`{"n": %d}`, i)),
			Group: fmt.Sprint("g", i), UniqueKey: fmt.Sprint("key", i), Tags: []string{fmt.Sprint("t", i)}}
	}
	check := func(what string, jobs []*readpast.Job) {
		t.Helper()
		if len(jobs) != n {
			t.Fatalf("%s: %d jobs, want %d", what, len(jobs), n)
		}
		byGroup := map[string]*readpast.Job{}
		for _, j := range jobs {
			if j.Group == nil {
				t.Fatalf("%s: job %d has no group", what, j.ID)
			}
			byGroup[*j.Group] = j
		}
		for i := range n {
			j := byGroup[fmt.Sprint("g", i)]
			if j == nil {
				t.Fatalf("%s: no job of group g%d among %d jobs: rows read into one another", what, i, len(jobs))
			}
			if want := fmt.Sprintf(`{"n": %d}`, i); string(j.Payload) != want {
				t.Errorf("%s: job of g%d has payload %s, want %s", what, i, j.Payload, want)
			}
			if j.UniqueKey != fmt.Sprint("key", i) || !slices.Equal(j.Tags, []string{fmt.Sprint("t", i)}) {
				t.Errorf("%s: job of g%d has unique key %q and tags %v", what, i, j.UniqueKey, j.Tags)
			}
		}
	}
	enqueued, err := s.Enqueue(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	check("enqueued", enqueued)
	claimed, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: n, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	check("claimed", claimed)
	starts := map[*readpast.Job]bool{}
	for _, j := range claimed {
		if j.Token == "" || j.Worker != "w" || j.StartedAt == nil || j.LeaseExpiresAt == nil {
			t.Errorf("claimed job %d: token %q, worker %q, started %v, lease %v", j.ID, j.Token, j.Worker, j.StartedAt, j.LeaseExpiresAt)
		}
		starts[j] = true
	}
	for a := range starts {
		for b := range starts {
			if a != b && (a.StartedAt == b.StartedAt || a.LeaseExpiresAt == b.LeaseExpiresAt || a.Group == b.Group) {
				t.Fatalf("jobs %d and %d share a time or group pointer", a.ID, b.ID)
			}
		}
	}
}
