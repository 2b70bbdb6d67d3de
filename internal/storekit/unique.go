package storekit

import "github.com/readpast/readpast"

// An enqueue batch may name a unique key more than once. Stores settle it
// as if its entries were enqueued one after another: the first entry with
// a key takes it (or finds it held), and every later entry with the same
// key is a duplicate of whatever job holds the key after the first one.

// FirstKeys returns, for each entry of jobs, the index of the first entry
// with the same unique key, or -1 for an entry without one.
func FirstKeys(jobs []readpast.EnqueueParams) []int {
	first := make([]int, len(jobs))
	seen := make(map[string]int)
	for i, p := range jobs {
		if p.UniqueKey == "" {
			first[i] = -1
			continue
		}
		f, ok := seen[p.UniqueKey]
		if !ok {
			f = i
			seen[p.UniqueKey] = i
		}
		first[i] = f
	}
	return first
}

// SettleKeyRepeats fills out[i] for each entry i that repeats an earlier
// entry's key (first[i] is neither i nor -1): a copy of the job that holds
// the key after the first entry, marked as a duplicate.
func SettleKeyRepeats(out []*readpast.Job, first []int) {
	for i, f := range first {
		if f == i || f < 0 || out[f] == nil {
			continue
		}
		dup := *out[f]
		dup.Duplicate = true
		out[i] = &dup
	}
}
