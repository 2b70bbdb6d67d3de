package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

func claimIDs(t *testing.T, s readpast.Store, limit int, queues ...string) []int64 {
	t.Helper()
	jobs, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: queues, Worker: "w", Limit: limit, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// A group is one ordered stream across queues: its head in queue b holds
// back its next job in queue a.
func TestGroupStreamAcrossQueues(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "b", Group: "G"},
		{Kind: "k", Queue: "a", Group: "G"},
		{Kind: "k", Queue: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, 10, "a"); fmt.Sprint(got) != fmt.Sprint([]int64{jobs[2].ID}) {
		t.Fatalf("claim from a: %v, want only the ungrouped job %d", got, jobs[2].ID)
	}
	got := claimIDs(t, s, 10, "b")
	if fmt.Sprint(got) != fmt.Sprint([]int64{jobs[0].ID}) {
		t.Fatalf("claim from b: %v, want the group head %d", got, jobs[0].ID)
	}
	if got := claimIDs(t, s, 10, "a"); len(got) != 0 {
		t.Fatalf("claimed %v while the group ran", got)
	}
	j, _ := s.Get(ctx, jobs[0].ID)
	if res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	if got := claimIDs(t, s, 10, "a"); fmt.Sprint(got) != fmt.Sprint([]int64{jobs[1].ID}) {
		t.Fatalf("claim from a after the head finished: %v, want %d", got, jobs[1].ID)
	}
}

// Long runs of one group's jobs, enqueued in one batch, between the jobs a
// claim should take, in several queues: one claim finds every group and
// job behind them.
func TestClaimSkipsLongGroupRuns(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if err := s.SetGroupLimit(ctx, "B", 3); err != nil {
		t.Fatal(err)
	}
	var ps []readpast.EnqueueParams
	for i := range 200 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Group: []string{"A", "B"}[i/100], Priority: 0})
	}
	for i := range 6 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: []string{"q1", "q2"}[i%2], Priority: 1})
	}
	jobs, err := s.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	// A gives its head, B its first three, then the six ungrouped jobs.
	want := []int64{jobs[0].ID, jobs[100].ID, jobs[101].ID, jobs[102].ID}
	for _, j := range jobs[200:] {
		want = append(want, j.ID)
	}
	if got := claimIDs(t, s, 50, "q1", "q2"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("claimed %v\nwant    %v", got, want)
	}
	if got := claimIDs(t, s, 50, "q1", "q2"); len(got) != 0 {
		t.Fatalf("claimed %v with every group full", got)
	}
}
