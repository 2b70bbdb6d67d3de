package storekit

import (
	"errors"

	"github.com/readpast/readpast"
)

// A Complete or Fail batch may name a job more than once. Stores settle it
// as if its entries were applied one after another: each distinct (job id,
// token) pair acts once, at its first entry that can be stored, and the
// store judges that entry on its own (so a stale entry before the current
// one does not stand for it). Repeats of a pair are then settled from the
// first one's outcome by SettleRepeats.

// FirstPairs returns, for each of the n entries of a batch, the index of
// the first entry with the same job id and token. Entries for which
// settled reports true (say, a result that cannot be stored) take no part
// and get -1.
func FirstPairs(n int, entry func(i int) (id int64, token string), settled func(i int) bool) []int {
	type pair struct {
		id    int64
		token string
	}
	first := make([]int, n)
	// Most batches name each job once: entries are told apart by id alone
	// (a map of strings was 3% of a drain's client CPU), until an id
	// comes again, and by (id, token) from there on.
	byID := make(map[int64]bool, n)
	var pairs map[pair]int
	for i := range n {
		if settled(i) {
			first[i] = -1
			continue
		}
		id, token := entry(i)
		if pairs == nil {
			if !byID[id] {
				byID[id] = true
				first[i] = i
				continue
			}
			// The first repeated id: every entry so far is its own first.
			pairs = make(map[pair]int, n)
			for j := range i {
				if first[j] == j {
					jid, jtoken := entry(j)
					pairs[pair{jid, jtoken}] = j
				}
			}
		}
		k := pair{id, token}
		f, ok := pairs[k]
		if !ok {
			f = i
			pairs[k] = i
		}
		first[i] = f
	}
	return first
}

// SettleRepeats gives each entry i that repeats an earlier pair (first[i]
// is neither i nor -1) the outcome it would have had one entry later: a
// completion repeated with the token that just completed the job is
// idempotent (nil); a failure repeated after the first one ended the claim
// finds it gone (ErrStaleToken); otherwise the repeat shares the first
// entry's error (ErrStaleToken or ErrNotFound).
func SettleRepeats(errs []error, first []int, completing bool) {
	for i, f := range first {
		if f == i || f < 0 {
			continue
		}
		switch e := errs[f]; {
		case e == nil && completing:
			errs[i] = nil
		case e == nil:
			errs[i] = readpast.ErrStaleToken
		case errors.Is(e, readpast.ErrNotFound):
			errs[i] = readpast.ErrNotFound
		default:
			errs[i] = readpast.ErrStaleToken
		}
	}
}
