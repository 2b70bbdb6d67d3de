package storekit

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// firstPairsPlain is FirstPairs as its doc states it: one map of (id,
// token) pairs.
func firstPairsPlain(n int, entry func(i int) (int64, string), settled func(i int) bool) []int {
	type pair struct {
		id    int64
		token string
	}
	first := make([]int, n)
	seen := map[pair]int{}
	for i := range n {
		if settled(i) {
			first[i] = -1
			continue
		}
		id, token := entry(i)
		f, ok := seen[pair{id, token}]
		if !ok {
			f = i
			seen[pair{id, token}] = i
		}
		first[i] = f
	}
	return first
}

// TestFirstPairs compares FirstPairs with the plain map of pairs over
// random batches: few ids and tokens, so that ids repeat with the same
// token and with others, early and late, around settled entries.
func TestFirstPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := r.IntN(12)
		ids := make([]int64, n)
		tokens := make([]string, n)
		settled := make([]bool, n)
		spread := 1 + r.IntN(n+1)
		for i := range n {
			ids[i] = int64(r.IntN(spread))
			tokens[i] = fmt.Sprint("t", r.IntN(2))
			settled[i] = r.IntN(6) == 0
		}
		entry := func(i int) (int64, string) { return ids[i], tokens[i] }
		isSettled := func(i int) bool { return settled[i] }
		got, want := FirstPairs(n, entry, isSettled), firstPairsPlain(n, entry, isSettled)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: ids %v tokens %v settled %v: FirstPairs %v, want %v", round, ids, tokens, settled, got, want)
		}
	}
}
