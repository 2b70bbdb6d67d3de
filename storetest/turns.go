package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testKeysTakeTurns: within one priority, keys take turns. A key's turn is
// the later of its first job's run-at and the last time a claim took jobs
// of it, so a key with a backlog that was just served goes behind the keys
// waiting since before that claim: a key's one job waits for one claim of
// the big key at most, not for its backlog.
func testKeysTakeTurns(t *testing.T, h Harness) {
	s := newStore(t, h)
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 1000})
	enqueue(t, s, keyed("t:big", 40)...)
	var small []string
	for i := range 5 {
		k := fmt.Sprintf("t:small%d", i)
		small = append(small, k)
		enqueue(t, s, keyed(k, 1)...)
	}
	time.Sleep(2 * time.Millisecond) // the claim's clock is past every run-at
	first := claim(t, s, 10, time.Minute)
	if n := countKeys(first); n["t:big"] != 10 {
		t.Fatalf("first claim took %v, want 10 of t:big, whose jobs are the oldest", n)
	}
	// t:big was served after the small keys' jobs were enqueued: they go
	// first, then t:big fills the claim.
	second := claim(t, s, 10, time.Minute)
	n := countKeys(second)
	for _, k := range small {
		if n[k] != 1 {
			t.Fatalf("second claim took %v, want each small key's job before more of t:big", n)
		}
	}
	if n["t:big"] != 5 {
		t.Fatalf("second claim took %v, want t:big to fill the rest (5)", n)
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
// the mark at the turn. In each case t:big (jobs enqueued first) is served
// by a first claim after t:small's job was enqueued; then t:small's job
// must come before more of t:big, even to a claim of one job, which walks
// a single mark.
func testTurnsKept(t *testing.T, h Harness) {
	setup := func(t *testing.T, conc, bigN, first int) (readpast.Store, []*readpast.Job) {
		s := newStore(t, h)
		if conc > 1 {
			putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: conc})
		}
		enqueue(t, s, keyed("t:big", bigN)...)
		time.Sleep(2 * time.Millisecond)
		enqueue(t, s, keyed("t:small", 1)...)
		time.Sleep(2 * time.Millisecond)
		c := claim(t, s, first, time.Minute)
		if n := countKeys(c); n["t:big"] != first {
			t.Fatalf("first claim took %v, want %d of t:big, the oldest", n, first)
		}
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
		wantSmall(t, s, 2)
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
		wantSmall(t, s, 2)
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
