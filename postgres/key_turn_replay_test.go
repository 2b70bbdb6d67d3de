package postgres_test

import (
	"context"
	"slices"
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

// TestTurnCountReadFromTheRowAsLocked: the jobs taken in a key's turn
// (turn_used) are read, like its turn, from the row as locked. Key t:w of
// weight 2, served once (its turn at that claim), has jobs due before
// three ungrouped jobs U1-U3. A claim of three stops before it locks
// t:w's row, its snapshot showing no job taken in the turn; another claim
// takes one of t:w's jobs (one of two: the turn stays) and commits. The
// first goes on: counting the other claim's job, it has one of t:w's jobs
// left in the first round, so it takes that one, U1 and U2, and ends
// t:w's turn (counted from the snapshot, it would take two of t:w's jobs
// and U1). Then t:w's turn is behind U3, and the next claim of one takes
// U3 (counted from the snapshot, t:w would keep its turn and go first).
func TestTurnCountReadFromTheRowAsLocked(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 100})
	putLimit(t, s, readpast.Limit{Key: "t:w", Concurrency: 100, Weight: 2})
	keyJobs(t, s, "t:w", "qa", 6)
	if got := claimWithin(t, "a claim of t:w", time.Second, s, claimQ("before", 2, "qa")); len(got) != 2 {
		t.Fatalf("claimed %v, want two of t:w's jobs (one turn of weight 2)", describe(got))
	}
	u, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "qa"}, {Kind: "k", Queue: "qa"}, {Kind: "k", Queue: "qa"}})
	if err != nil {
		t.Fatal(err)
	}
	first := newStall(t, s, "claim.group_rows")
	var got1 []*readpast.Job
	done1 := async(func() error {
		var err error
		got1, err = first.store.Claim(ctx, claimQ("first", 3, "qa"))
		return err
	})
	first.waitBlocked() // its snapshot shows t:w with no job taken in its turn
	// A job of t:w that the first claim's snapshot does not show gives the
	// key a mark of its own, through which a second claim serves it.
	keyJobs(t, s, "t:w", "qa", 1)
	got2 := claimWithin(t, "a second claim", time.Second, s, claimQ("second", 1, "qa"))
	if len(got2) != 1 || groupName(got2[0].Group) != "t:w" {
		t.Fatalf("the second claim took %v, want a job of t:w (its turn is older than U's run-at)", describe(got2))
	}
	first.open()
	within(t, "the first claim", 2*time.Second, done1)
	ids := make([]int64, len(got1))
	for i, j := range got1 {
		ids[i] = j.ID
	}
	keyed := slices.IndexFunc(got1, func(j *readpast.Job) bool { return groupName(j.Group) == "t:w" })
	if len(got1) != 3 || keyed < 0 || !slices.Contains(ids, u[0].ID) || !slices.Contains(ids, u[1].ID) {
		t.Fatalf("the first claim took %v, want t:w's next job (the turn's second), U1 and U2", describe(got1))
	}
	got3 := claimWithin(t, "a third claim", time.Second, s, claimQ("third", 1, "qa"))
	if len(got3) != 1 || got3[0].ID != u[2].ID {
		t.Fatalf("the third claim took %v, want U3: t:w started its two jobs of the turn, and went behind U3", describe(got3))
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
