package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// claimPerKey claims up to n jobs and counts them per key.
func claimPerKey(t *testing.T, s *sqlite.Store, n int) map[string]int {
	t.Helper()
	jobs, err := s.Claim(context.Background(), readpast.ClaimParams{Worker: "w", Limit: n, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, j := range jobs {
		if j.Group != nil {
			out[*j.Group]++
		}
	}
	return out
}

// keyWeight reads the weight key's row carries, or -1 without a row.
func keyWeight(t *testing.T, s *sqlite.Store, key string) int {
	t.Helper()
	w := -1
	rows, err := s.DB().Query(`SELECT weight FROM readpast_groups WHERE group_key = ?`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return w
}

func mustPut(t *testing.T, s *sqlite.Store, l readpast.Limit) {
	t.Helper()
	if _, err := s.PutLimit(context.Background(), l); err != nil {
		t.Fatalf("PutLimit(%+v): %v", l, err)
	}
}

// A key of weight w takes up to w jobs in each round of a claim, and a
// PutLimit that changes only the weight changes the next claim's share.
func TestKeyWeightsShareAClaim(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustPut(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 2})
	mustPut(t, s, readpast.Limit{Key: "w:b", Concurrency: 100, Weight: 1})
	if _, err := s.Enqueue(ctx, append(keyJobs("", "w:a", 10), keyJobs("", "w:b", 10)...)); err != nil {
		t.Fatal(err)
	}
	if n := claimPerKey(t, s, 6); n["w:a"] != 4 || n["w:b"] != 2 {
		t.Fatalf("a claim of 6 took %v, want 4 of w:a (weight 2) and 2 of w:b (weight 1)", n)
	}
	if a, b := keyWeight(t, s, "w:a"), keyWeight(t, s, "w:b"); a != 2 || b != 1 {
		t.Fatalf("rows' weights %d, %d; want 2, 1", a, b)
	}
	mustPut(t, s, readpast.Limit{Key: "w:a", Concurrency: 100, Weight: 1})
	if a := keyWeight(t, s, "w:a"); a != 1 {
		t.Fatalf("w:a's row has weight %d after its weight alone went to 1", a)
	}
	if n := claimPerKey(t, s, 4); n["w:a"] != 2 || n["w:b"] != 2 {
		t.Fatalf("after w:a's weight went to 1, a claim of 4 took %v, want 2 of each", n)
	}
	mustPut(t, s, readpast.Limit{Key: "w:b", Concurrency: 100, Weight: 3})
	if n := claimPerKey(t, s, 4); n["w:a"] != 1 || n["w:b"] != 3 {
		t.Fatalf("after w:b's weight went to 3, a claim of 4 took %v, want 1 of w:a and 3 of w:b", n)
	}
}

// A weight is stored as put (1 for 0), kept by SetGroupLimit, resolved
// into the rows of the keys it governs (created by a claim or by
// TakeTokens, or changed by a limit change), and a deleted limit gives
// the rows the weight that governs them then.
func TestKeyWeightsStoredAndResolved(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustPut(t, s, readpast.Limit{Key: "d:*", Concurrency: 10, Weight: 3})
	mustPut(t, s, readpast.Limit{Key: "d:x", Concurrency: 10, Weight: 5})
	mustPut(t, s, readpast.Limit{Key: "plain", Concurrency: 2})
	if l, err := s.GetLimit(ctx, "plain"); err != nil || l.Weight != 1 {
		t.Fatalf("GetLimit(plain) = %+v, %v; want weight 1", l, err)
	}
	if err := s.SetGroupLimit(ctx, "d:x", 7); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetLimit(ctx, "d:x"); err != nil || l.Concurrency != 7 || l.Weight != 5 {
		t.Fatalf("after SetGroupLimit: %+v, %v; want concurrency 7, weight 5", l, err)
	}
	if ls, err := s.ListLimits(ctx); err != nil || len(ls) != 3 || ls[0].Weight != 3 || ls[1].Weight != 5 || ls[2].Weight != 1 {
		t.Fatalf("ListLimits = %+v, %v", ls, err)
	}

	if _, err := s.Enqueue(ctx, append(keyJobs("", "d:x", 2), keyJobs("", "d:y", 2)...)); err != nil {
		t.Fatal(err)
	}
	claimPerKey(t, s, 4)
	if x, y := keyWeight(t, s, "d:x"), keyWeight(t, s, "d:y"); x != 5 || y != 3 {
		t.Fatalf("rows created by a claim: weights %d, %d; want 5 (own), 3 (template)", x, y)
	}
	if err := s.DeleteLimit(ctx, "d:x"); err != nil {
		t.Fatal(err)
	}
	if x := keyWeight(t, s, "d:x"); x != 3 {
		t.Fatalf("after its own limit went: weight %d, want the template's 3", x)
	}
	if err := s.DeleteLimit(ctx, "d:*"); err != nil {
		t.Fatal(err)
	}
	if x, y := keyWeight(t, s, "d:x"), keyWeight(t, s, "d:y"); x != 1 || y != 1 {
		t.Fatalf("after the template went: weights %d, %d; want the default's 1", x, y)
	}

	mustPut(t, s, readpast.Limit{Key: "t:*", Rate: 1, Per: time.Hour, Weight: 4})
	if g, err := s.TakeTokens(ctx, "t:k", 1); err != nil || !g.Granted {
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	if w := keyWeight(t, s, "t:k"); w != 4 {
		t.Fatalf("row created by TakeTokens: weight %d, want 4", w)
	}
}
