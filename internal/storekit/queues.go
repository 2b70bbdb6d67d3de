package storekit

import (
	"sort"
	"time"

	"github.com/readpast/readpast"
)

// QueueInfos merges per-state stats and the paused queues (name to the
// time each was paused) into one QueueInfo per queue, sorted by name, as
// Store.Queues returns them.
func QueueInfos(stats []readpast.QueueStats, paused map[string]time.Time) []readpast.QueueInfo {
	by := map[string]*readpast.QueueInfo{}
	get := func(name string) *readpast.QueueInfo {
		q, ok := by[name]
		if !ok {
			q = &readpast.QueueInfo{Name: name, Counts: map[readpast.JobState]int64{}}
			by[name] = q
		}
		return q
	}
	for _, st := range stats {
		get(st.Queue).Counts[st.State] += st.Count
	}
	for name, at := range paused {
		q := get(name)
		q.Paused = true
		at := at.UTC()
		q.PausedAt = &at
	}
	out := make([]readpast.QueueInfo, 0, len(by))
	for _, q := range by {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SortStats orders stats by queue, then state in lifecycle order, the
// order every store returns them in.
func SortStats(st []readpast.QueueStats) {
	rank := map[readpast.JobState]int{}
	for i, s := range readpast.AllStates {
		rank[s] = i
	}
	sort.Slice(st, func(i, j int) bool {
		if st[i].Queue != st[j].Queue {
			return st[i].Queue < st[j].Queue
		}
		return rank[st[i].State] < rank[st[j].State]
	})
}
