package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestKeyTurnReadFromTheRowAsLocked: a claim whose snapshot shows a key
// never served stops before it locks the key's row; another claim serves
// the key and commits; the first goes on. It must order the key's jobs at
// the turn it reads from the row it locked (just served: behind the
// ungrouped jobs enqueued before that), not at the one its snapshot
// shows, which would put the key's oldest job first again.
func TestKeyTurnReadFromTheRowAsLocked(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 100})
	keyJobs(t, s, "t:big", "qa", 4) // the oldest jobs
	// t:big is served once, and its row stays: the first claim will find
	// it in its snapshot with that turn, before the ungrouped jobs.
	served := claimWithin(t, "a claim of t:big", time.Second, s, claimQ("before", 1, "qa"))
	if len(served) != 1 {
		t.Fatalf("claimed %v, want t:big's first job", served)
	}
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: served[0].ID, Token: served[0].Token}}); err != nil {
		t.Fatal(err)
	}
	var ungrouped []*readpast.Job
	for range 2 {
		js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "qa"}})
		if err != nil {
			t.Fatal(err)
		}
		ungrouped = append(ungrouped, js...)
	}
	first := newStall(t, s, "claim.group_rows")
	var got1 []*readpast.Job
	done1 := async(func() error {
		var err error
		got1, err = first.store.Claim(ctx, claimQ("first", 2, "qa"))
		return err
	})
	first.waitBlocked() // its snapshot shows t:big served before the ungrouped jobs came
	// A job of t:big that the first claim's snapshot does not show gives
	// the key a mark of its own, through which a second claim serves it.
	keyJobs(t, s, "t:big", "qa", 1)
	got2 := claimWithin(t, "a second claim", time.Second, s, claimQ("second", 1, "qa"))
	if len(got2) != 1 || groupName(got2[0].Group) != "t:big" {
		t.Fatalf("the second claim took %v, want t:big's next job (its turn is older than the ungrouped jobs')", describe(got2))
	}
	first.open()
	within(t, "the first claim", 2*time.Second, done1)
	if len(got1) != 2 || got1[0].ID != ungrouped[0].ID && got1[1].ID != ungrouped[0].ID ||
		got1[0].ID != ungrouped[1].ID && got1[1].ID != ungrouped[1].ID {
		t.Fatalf("the first claim took %v, want the two ungrouped jobs: t:big was served after they were enqueued", describe(got1))
	}
	checkGroups(t, s)
}

func groupName(g *string) string {
	if g == nil {
		return "-"
	}
	return *g
}

func describe(jobs []*readpast.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = groupName(j.Group) + "/" + j.Queue
	}
	return out
}
