package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testPauseGroupStream: a group is one ordered stream across queues, and
// pausing a queue does not reorder it. While queue p is paused, a job of
// group g in an open queue o runs if it comes before p's first job of g in
// claim order, and waits if it comes after, until p's job has run (after a
// resume) or left the stream (cancelled here, by Cancel or a bulk cancel
// of p); other groups and ungrouped jobs of o are not held back.
func testPauseGroupStream(t *testing.T, h Harness) {
	for _, exit := range []string{"resume", "cancel", "bulk cancel"} {
		t.Run(exit, func(t *testing.T) {
			s := newStore(t, h)
			ctx := ctxT(t)
			jobs := enqueue(t, s,
				readpast.EnqueueParams{Kind: "k", Queue: "p", Group: "g", Priority: 2},
				readpast.EnqueueParams{Kind: "k", Queue: "o", Group: "g", Priority: 1},
				readpast.EnqueueParams{Kind: "k", Queue: "o", Group: "g", Priority: 2},
				readpast.EnqueueParams{Kind: "k", Queue: "o", Group: "h", Priority: 2},
				readpast.EnqueueParams{Kind: "k", Queue: "o", Priority: 2},
			)
			pHead, oUrgent, oLater, otherGroup, plain := jobs[0], jobs[1], jobs[2], jobs[3], jobs[4]
			if err := s.PauseQueue(ctx, "p"); err != nil {
				t.Fatal(err)
			}
			// g's urgent job in o comes before p's in claim order: it runs.
			c := claim(t, s, 10, time.Minute, "o")
			if want := []int64{oUrgent.ID, otherGroup.ID, plain.ID}; !slices.Equal(ids(c), want) {
				t.Fatalf("claim of o with p paused took %v, want %v (g's job ahead of p's, group h's, the ungrouped one)", ids(c), want)
			}
			for _, j := range c {
				if err := completeOne(ctx, s, j, ""); err != nil {
					t.Fatal(err)
				}
			}
			// Now p's job heads g: o's later job of g waits behind it.
			if c := claim(t, s, 10, time.Minute, "o"); len(c) != 0 {
				t.Fatalf("claim of o took %v while g's head %d waits in paused p", ids(c), pHead.ID)
			}
			if c := claim(t, s, 10, time.Minute, "p"); len(c) != 0 {
				t.Fatalf("claim of paused p took %v", ids(c))
			}
			switch exit {
			case "resume":
				if err := s.ResumeQueue(ctx, "p"); err != nil {
					t.Fatal(err)
				}
				c := claim(t, s, 10, time.Minute, "o", "p")
				if len(c) != 1 || c[0].ID != pHead.ID {
					t.Fatalf("after resume took %v, want g's head [%d] alone (limit 1)", ids(c), pHead.ID)
				}
				if err := completeOne(ctx, s, c[0], ""); err != nil {
					t.Fatal(err)
				}
			case "cancel":
				if _, err := s.Cancel(ctx, pHead.ID); err != nil {
					t.Fatal(err)
				}
			case "bulk cancel":
				if n, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: "p"}); err != nil || n != 1 {
					t.Fatalf("bulk cancel of p: %d, %v; want 1", n, err)
				}
			}
			c = claim(t, s, 10, time.Minute, "o")
			if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{oLater.ID}) {
				t.Fatalf("after p's job %s, claim of o took %v, want [%d]", exit, ids(c), oLater.ID)
			}
		})
	}
}
