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

// testWeightedTurns: a key's weight is its share of a claim's rounds: a
// claim takes up to weight jobs of each key it reads in each round. A
// change of the weight alone applies to the next claim.
func testWeightedTurns(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 100})
	putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 3})
	enqueue(t, s, keyed("w:a", 20)...)
	enqueue(t, s, keyed("w:b", 20)...)
	time.Sleep(2 * time.Millisecond)
	// Two rounds: three of w:a and one of w:b in each.
	if n := countKeys(claim(t, s, 8, time.Minute)); n["w:a"] != 6 || n["w:b"] != 2 {
		t.Fatalf("a claim of 8 took %v, want 6 of w:a (weight 3) and 2 of w:b (weight 1)", n)
	}
	// Both keys were served by that claim; w:a's weight back to 1 makes
	// the shares equal.
	putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 1})
	if n := countKeys(claim(t, s, 4, time.Minute)); n["w:a"] != 2 || n["w:b"] != 2 {
		t.Fatalf("after w:a's weight went back to 1, a claim of 4 took %v, want 2 of each", n)
	}
	// A template's weight governs the keys it matches.
	putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 100, Weight: 2})
	if n := countKeys(claim(t, s, 6, time.Minute)); n["w:a"] != 2 || n["w:b"] != 4 {
		t.Fatalf("after the template's weight went to 2, a claim of 6 took %v, want 4 of w:b (weight 2) and 2 of w:a (its own limit, weight 1)", n)
	}
}

// testWeightsAcrossClaims: a key keeps its turn until claims have taken
// its weight's worth of jobs, however many claims that takes. Backlogged
// keys of weights 3 and 1, claimed a job at a time, start three and one of
// every four; so do claims of two, which cut the heavier key's round in
// the middle (the next claim finishes it before the lighter key's turn).
// Without the count of jobs taken in a turn, claims of one job alternate
// the keys whatever their weights.
func testWeightsAcrossClaims(t *testing.T, h Harness) {
	for _, size := range []int{1, 2} {
		t.Run(fmt.Sprint("claims of ", size), func(t *testing.T) {
			s := newStore(t, h)
			putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 100})
			putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 3})
			enqueue(t, s, keyed("w:a", 40)...)
			enqueue(t, s, keyed("w:b", 40)...)
			time.Sleep(2 * time.Millisecond)
			var got []string
			for len(got) < 32 {
				c := claim(t, s, size, time.Minute)
				if len(c) != size {
					t.Fatalf("a claim of %d took %d", size, len(c))
				}
				for _, j := range c {
					got = append(got, groupName(j.Group))
				}
			}
			for i := 0; i+4 <= len(got); i += 4 {
				a := 0
				for _, k := range got[i : i+4] {
					if k == "w:a" {
						a++
					}
				}
				if a != 3 {
					t.Fatalf("starts %d-%d were %v, want three of w:a (weight 3) and one of w:b (weight 1); all: %v", i, i+3, got[i:i+4], got)
				}
			}
		})
	}
	// A key whose every job completes before the next claim keeps its
	// count of jobs taken in its turn: its row stays while it has jobs
	// waiting, through completions and PruneGroups (SQLite forgets idle
	// rows at every finish; a row created again would start the turn
	// over, and a key of weight 2 would never move on).
	t.Run("CountKeptThroughCompletionsAndPrunes", func(t *testing.T) {
		s := newStore(t, h)
		putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 1, Weight: 2})
		putLimit(t, s, readpast.Limit{Key: "w:b", Concurrency: 1})
		enqueue(t, s, keyed("w:a", 8)...)
		enqueue(t, s, keyed("w:b", 8)...)
		time.Sleep(2 * time.Millisecond)
		p, ok := s.(readpast.GroupPruner)
		if !ok {
			t.Fatal("the store does not prune group rows (readpast.GroupPruner)")
		}
		var got []string
		for range 9 {
			c := claim(t, s, 1, time.Minute)
			if len(c) != 1 {
				t.Fatalf("a claim of one took %d", len(c))
			}
			got = append(got, groupName(c[0].Group))
			if err := completeOne(ctxT(t), s, c[0], ""); err != nil {
				t.Fatal(err)
			}
			if _, err := p.PruneGroups(ctxT(t), 100); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"w:a", "w:a", "w:b", "w:a", "w:a", "w:b", "w:a", "w:a", "w:b"}; !slices.Equal(got, want) {
			t.Fatalf("claims of one job, each completed and the idle rows pruned, took %v, want %v", got, want)
		}
	})
	// A weight lowered below the jobs already taken in the key's turn
	// leaves the key's next job in the first round, at its turn: it is not
	// pushed behind every other key's rounds.
	t.Run("WeightLoweredBelowTheCount", func(t *testing.T) {
		s := newStore(t, h)
		putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 100})
		putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 10})
		enqueue(t, s, keyed("w:a", 20)...)
		time.Sleep(2 * time.Millisecond)
		if n := countKeys(claim(t, s, 9, time.Minute)); n["w:a"] != 9 {
			t.Fatalf("a claim of 9 took %v, want 9 of w:a", n)
		}
		enqueue(t, s, keyed("w:b", 40)...)
		time.Sleep(2 * time.Millisecond)
		putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 1})
		c := claim(t, s, 5, time.Minute)
		if len(c) == 0 || groupName(c[0].Group) != "w:a" {
			t.Fatalf("the claim after w:a's weight went from 10 to 1 took %v first, want w:a (its turn came first)", countKeys(c))
		}
		if n := countKeys(c); n["w:a"] != 3 || n["w:b"] != 2 {
			t.Fatalf("the claim after w:a's weight went from 10 to 1 took %v, want 3 of w:a and 2 of w:b, taking turns from w:a", n)
		}
	})
	// A weight lowered below the jobs taken in the turn ends the turn at
	// the next job taken, and the next turn is a whole one of the new
	// weight, in claims of one job.
	t.Run("WholeTurnAfterTheWeightWasLowered", func(t *testing.T) {
		s := newStore(t, h)
		putLimit(t, s, readpast.Limit{Key: "w:*", Concurrency: 100})
		putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 10})
		enqueue(t, s, keyed("w:a", 40)...)
		time.Sleep(2 * time.Millisecond)
		if got := claimOneByOne(t, s, 9); slices.ContainsFunc(got, func(k string) bool { return k != "w:a" }) {
			t.Fatalf("claims of one took %v, want w:a's only", got)
		}
		enqueue(t, s, keyed("w:b", 40)...)
		time.Sleep(2 * time.Millisecond)
		putLimit(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 4})
		got := claimOneByOne(t, s, 11)
		want := []string{"w:a", "w:b", "w:a", "w:a", "w:a", "w:a", "w:b", "w:a", "w:a", "w:a", "w:a"}
		if !slices.Equal(got, want) {
			t.Fatalf("after w:a took 9 of its turn of 10 and its weight went to 4, claims of one took %v, want %v", got, want)
		}
	})
}

// claimOneByOne makes n claims of one job and returns the keys of the jobs
// they took, in order; each must take one.
func claimOneByOne(t *testing.T, s readpast.Store, n int) []string {
	t.Helper()
	var got []string
	for range n {
		c := claim(t, s, 1, time.Minute)
		if len(c) != 1 {
			t.Fatalf("a claim of one took %d", len(c))
		}
		got = append(got, groupName(c[0].Group))
	}
	return got
}

// testRoundsCountTakenHeads: a job's round counts only the jobs of its key
// the claim can take. Key t:k's first job waits in a queue nobody claims
// from; its other jobs, in the claimed queue, are due before four
// ungrouped jobs (each in the first round, as a key of one job would be).
// A claim of 4 must take t:k's first job there: counted from the job in
// the other queue, it would be in the second round, after all four
// ungrouped jobs, and t:k would take nothing, claim after claim.
func testRoundsCountTakenHeads(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 10})
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "elsewhere", Group: "t:k"})
	first := enqueue(t, s, keyed("t:k", 3)...)
	time.Sleep(2 * time.Millisecond)
	for range 4 {
		enqueue(t, s, readpast.EnqueueParams{Kind: "u"})
	}
	time.Sleep(2 * time.Millisecond)
	got := claim(t, s, 4, time.Minute, readpast.DefaultQueue)
	n := countKeys(got)
	if n["t:k"] != 1 || !slices.Contains(ids(got), first[0].ID) {
		t.Fatalf("a claim of 4 took %v, want t:k's first job in this queue (due first) and 3 ungrouped jobs", n)
	}
}
