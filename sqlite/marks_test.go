package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestClaimReadsMarksUntilItHasItsKeys: a claim of n jobs takes one of
// each of n keys whose jobs are due, though each key has two due marks
// ahead of the others' (its completion marks its next job, and so does
// the enqueue of a job behind it): a claim reads marks until it has
// found n keys, not n marks. Ten keys of one job at a time, in claims of
// three: from the fourth claim on, the marks that come first are the two
// of each key the earlier claims' completions and enqueues left; read as
// the first three marks, they named two keys.
func TestClaimReadsMarksUntilItHasItsKeys(t *testing.T) {
	s, clock := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "f:*", Concurrency: 1})
	const keys, n = 10, 3
	var ps []readpast.EnqueueParams
	for range 3 {
		for k := range keys {
			ps = append(ps, kjob(fmt.Sprint("f:", k)))
		}
	}
	keysEnqueue(t, s, ps...)
	for i := range 8 {
		clock.add(time.Millisecond)
		got := keysClaim(t, s, n, time.Minute)
		taken := map[string]int{}
		for _, j := range got {
			taken[*j.Group]++
		}
		if len(got) != n || len(taken) != n {
			t.Fatalf("claim %d took %v, want one job of each of %d keys (each of the %d keys has a due job)", i, taken, n, keys)
		}
		keysComplete(t, s, got...)
		var more []readpast.EnqueueParams
		for _, j := range got {
			more = append(more, kjob(*j.Group))
		}
		keysEnqueue(t, s, more...)
	}
}

// TestClaimReadsPastKeysThatGiveNothing: a claim reads on past the
// marks of keys that can give no job, and takes the next key's job:
// f:a full (it runs its one job; two more enqueued one by one mark it
// twice), t:a out of tokens (a start an hour, spent; the enqueue of its
// next job marks it), c:a whose only job was cancelled (its mark stays
// until a claim reads it). Reading the first key, which gave nothing, a
// claim of one took nothing, and SQLite has no note to look again.
func TestClaimReadsPastKeysThatGiveNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s *Store, clock *keysClock)
	}{
		{"full", func(t *testing.T, s *Store, clock *keysClock) {
			keysPut(t, s, readpast.Limit{Key: "f:*", Concurrency: 1})
			keysEnqueue(t, s, kjob("f:a"))
			if got := keysClaim(t, s, 1, time.Minute); len(got) != 1 {
				t.Fatalf("the first claim took %d jobs, want f:a's", len(got))
			}
			for range 2 {
				clock.add(time.Millisecond)
				keysEnqueue(t, s, kjob("f:a"))
			}
		}},
		{"out of tokens", func(t *testing.T, s *Store, clock *keysClock) {
			keysPut(t, s, readpast.Limit{Key: "t:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
			keysEnqueue(t, s, kjob("t:a"))
			got := keysClaim(t, s, 1, time.Minute)
			if len(got) != 1 {
				t.Fatalf("the first claim took %d jobs, want t:a's", len(got))
			}
			keysComplete(t, s, got...)
			clock.add(time.Millisecond)
			keysEnqueue(t, s, kjob("t:a"))
		}},
		{"cancelled", func(t *testing.T, s *Store, clock *keysClock) {
			j := keysEnqueue(t, s, kjob("c:a"))[0]
			if _, err := s.Cancel(context.Background(), j.ID); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, clock := openKeys(t)
			tc.setup(t, s, clock)
			clock.add(time.Millisecond)
			keysEnqueue(t, s, kjob("b:1"))
			clock.add(time.Millisecond)
			got := keysClaim(t, s, 1, time.Minute)
			if len(got) != 1 || *got[0].Group != "b:1" {
				t.Fatalf("a claim of one took %d jobs, want b:1's", len(got))
			}
		})
	}
}
