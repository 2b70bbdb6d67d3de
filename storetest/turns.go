package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testKeysTakeTurns: within one priority, keys take turns. A key's turn is
// the later of its first job's run-at and the last time a claim took jobs
// of it, so a key with a backlog that was just served goes behind the keys
// waiting since before that claim: a key's one job waits for one claim of
// the big key at most, not for its backlog. And one claim takes a job of
// each key it reads before a second of any.
func testKeysTakeTurns(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 1000})
	enqueue(t, s, keyed("t:big", 40)...)
	small := func(from, n int) []string {
		var keys []string
		for i := from; i < from+n; i++ {
			k := fmt.Sprintf("t:small%d", i)
			keys = append(keys, k)
			enqueue(t, s, keyed(k, 1)...)
		}
		return keys
	}
	// Claims of one job each: t:big's jobs are the oldest, so it goes
	// first; served after the small keys' jobs were enqueued, it goes
	// behind them.
	want := append(append([]string{"t:big"}, small(0, 5)...), "t:big")
	time.Sleep(2 * time.Millisecond) // the claims' clock is past every run-at
	var first []*readpast.Job
	var got []string
	for range want {
		c := claim(t, s, 1, time.Minute)
		if len(c) != 1 {
			t.Fatalf("a claim of one job took %d", len(c))
		}
		first = append(first, c[0])
		got = append(got, groupName(c[0].Group))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claims of one job took %v, want %v: each small key's job before more of t:big", got, want)
	}
	// Five keys enqueue a job each after t:big was served: its turn comes
	// first, but a claim of 10 that reads all six keys takes one job of
	// each before more of t:big.
	later := small(5, 5)
	time.Sleep(2 * time.Millisecond)
	second := claim(t, s, 10, time.Minute)
	n := countKeys(second)
	for _, k := range later {
		if n[k] != 1 {
			t.Fatalf("a claim of 10 took %v, want one job of each key it read (%v and t:big) before a second of t:big", n, later)
		}
	}
	if n["t:big"] != 5 {
		t.Fatalf("a claim of 10 took %v, want t:big to fill the rest (5)", n)
	}
	// Within a key, order holds: t:big's jobs come in enqueue order.
	var last int64
	for _, j := range append(first, second...) {
		if groupName(j.Group) == "t:big" {
			if j.ID < last {
				t.Fatalf("t:big's jobs out of order: %v then %v", last, j.ID)
			}
			last = j.ID
		}
	}
	// A key with a higher priority job still goes first: turns order keys
	// within one priority.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "t:urgent", Priority: -1})
	third := claim(t, s, 1, time.Minute)
	if len(third) != 1 || groupName(third[0].Group) != "t:urgent" {
		t.Fatalf("third claim took %v, want t:urgent's job of priority -1", countKeys(third))
	}
}

// testTurnsKept: a key's turn outlasts everything that happens to the
// key between two claims, and every way a job of the key is marked puts
// the mark at the turn. In each case t:big is served by a first claim,
// and t:small's job, due before that claim, is enqueued after it; then
// t:small's job must come before more of t:big, even to a claim of one
// job, which walks a single mark. (A claim of more walks t:small's mark
// too, and takes its job in its first round whatever the turns.)
func testTurnsKept(t *testing.T, h Harness) {
	setup := func(t *testing.T, conc, bigN, first int) (readpast.Store, []*readpast.Job) {
		s := newStore(t, h)
		if conc > 1 {
			putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: conc})
		}
		enqueue(t, s, keyed("t:big", bigN)...)
		time.Sleep(2 * time.Millisecond)
		due := time.Now() // t:small's run-at: before the claim's transaction begins
		time.Sleep(2 * time.Millisecond)
		c := claim(t, s, first, time.Minute)
		if n := countKeys(c); n["t:big"] != first {
			t.Fatalf("first claim took %v, want %d of t:big", n, first)
		}
		enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "t:small", RunAt: due})
		return s, c
	}
	wantSmall := func(t *testing.T, s readpast.Store, limit int) {
		t.Helper()
		if n := countKeys(claim(t, s, limit, time.Minute)); n["t:small"] != 1 {
			t.Fatalf("claim(%d) took %v, want t:small's job, due before t:big was served", limit, n)
		}
	}
	complete := func(t *testing.T, s readpast.Store, jobs []*readpast.Job) {
		for _, j := range jobs {
			if err := completeOne(ctxT(t), s, j, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("CompletionOfAConcurrencyOneKey", func(t *testing.T) {
		s, c := setup(t, 1, 3, 1)
		complete(t, s, c)
		wantSmall(t, s, 1)
	})
	t.Run("KeyLeftIdle", func(t *testing.T) {
		s, c := setup(t, 1000, 5, 2)
		complete(t, s, c)
		wantSmall(t, s, 1)
	})
	t.Run("Release", func(t *testing.T) {
		s, c := setup(t, 1000, 5, 2)
		if err := s.Release(ctxT(t), c[1].ID, c[1].Token); err != nil {
			t.Fatal(err)
		}
		wantSmall(t, s, 1)
	})
	t.Run("LimitChange", func(t *testing.T) {
		s, _ := setup(t, 1000, 5, 2)
		putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 999})
		wantSmall(t, s, 1)
	})
	t.Run("PruneGroups", func(t *testing.T) {
		s, c := setup(t, 1000, 5, 2)
		complete(t, s, c)
		p, ok := s.(readpast.GroupPruner)
		if !ok {
			t.Fatal("the store does not prune group rows (readpast.GroupPruner)")
		}
		if _, err := p.PruneGroups(ctxT(t), 100); err != nil {
			t.Fatal(err)
		}
		wantSmall(t, s, 1)
	})
	t.Run("RowPrunedWhenTheTurnNoLongerMatters", func(t *testing.T) {
		// A served key whose waiting jobs all come due after its turn (a
		// job that enqueues the next one for tomorrow) keeps no row: the
		// job takes its place at its run-at anyway.
		s, c := setup(t, 1000, 2, 2)
		enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "t:big", RunAt: time.Now().Add(time.Hour)})
		complete(t, s, c)
		p := s.(readpast.GroupPruner)
		if _, err := p.PruneGroups(ctxT(t), 100); err != nil {
			t.Fatal(err)
		}
		gs, err := h.Groups(ctxT(t), s)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.Group == "t:big" && g.Row {
				t.Fatalf("t:big's row was kept (%+v), though its one waiting job comes due an hour after its turn", g)
			}
		}
	})
	t.Run("EnqueuedWithAPastRunAt", func(t *testing.T) {
		s, _ := setup(t, 1000, 1, 1)
		enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "t:big", RunAt: time.Now().Add(-time.Hour)})
		wantSmall(t, s, 1)
	})
}
