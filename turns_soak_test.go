package readpast_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

var turnsSoak = flag.Bool("turns.soak", false,
	"run TestTurnsUnderLoad at full scale: a backlog of 100,000 jobs on one key, 1,000 keys of one job each, 4 clients x 32 workers, and p99 of their waits at most 100 ms")

var turnsBound = flag.Int("turns.bound", 0,
	"TestTurnsShareEqually and TestWeightedShares: the keys' concurrency bound (0: none)")

// TestTurnsUnderLoad: one key holds a backlog that keeps every worker
// busy, and other keys enqueue one job each meanwhile, every few
// milliseconds. Each of those jobs must start before the big key starts
// more than a few claims' worth of jobs after its enqueue: keys take
// turns, so the backlog delays it by about one claim, not by the
// backlog. The waits (started_at minus enqueue, on the database's clock)
// go to the log; with -turns.soak, at full scale, their p99 must be at
// most 100 ms.
//
//	go test -run TestTurnsUnderLoad -count=1 -v . -args -turns.soak
func TestTurnsUnderLoad(t *testing.T) {
	// Handlers take work to 2 x work: the backlog outlasts the small
	// keys' enqueues.
	big, small, clients, workers := 20_000, 100, 1, 32
	spacing, work := 10*time.Millisecond, 10*time.Millisecond
	if *turnsSoak {
		big, small, clients, workers = 100_000, 1_000, 4, 32
		spacing, work = 2*time.Millisecond, 20*time.Millisecond
	}
	ctx := context.Background()
	base, url := newPGStoreURL(t)
	if _, err := base.PutLimit(ctx, readpast.Limit{Key: "t:*"}); err != nil {
		t.Fatal(err)
	}
	enqueueKeyed(t, base, "t:big", big)
	var (
		mu        sync.Mutex
		bigStarts []time.Time
		started   = map[int64]time.Time{}
		done      = make(chan struct{})
	)
	smallIDs := map[int64]bool{}
	w := readpast.NewWorkers()
	w.Handle("work", func(ctx context.Context, job *readpast.Job) (any, error) {
		mu.Lock()
		if *job.Group == "t:big" {
			bigStarts = append(bigStarts, *job.StartedAt)
		} else {
			started[job.ID] = *job.StartedAt
			if len(started) == small {
				close(done)
			}
		}
		mu.Unlock()
		time.Sleep(work + rand.N(work))
		return nil, nil
	}, nil)
	cs := startPGClients(t, url, clients, workers, w)
	defer func() {
		for _, c := range cs {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c.Stop(sctx)
			cancel()
		}
	}()
	time.Sleep(500 * time.Millisecond) // the backlog is being drained
	enqueued := map[int64]time.Time{}
	for i := range small {
		js, err := base.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "work", Group: fmt.Sprint("t:small", i)}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		smallIDs[js[0].ID] = true
		mu.Unlock()
		enqueued[js[0].ID] = js[0].RunAt
		time.Sleep(spacing)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%d of %d small keys' jobs started in 2 minutes", len(started), small)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(bigStarts, time.Time.Compare)
	var waits []time.Duration
	worstBetween := 0
	for id, at := range enqueued {
		st := started[id]
		waits = append(waits, st.Sub(at))
		// The big key's starts after this job was enqueued and before it
		// started.
		from, _ := slices.BinarySearchFunc(bigStarts, at, time.Time.Compare)
		to, _ := slices.BinarySearchFunc(bigStarts, st, time.Time.Compare)
		worstBetween = max(worstBetween, to-from)
	}
	slices.Sort(waits)
	last := waits[len(waits)-1]
	p := func(q float64) time.Duration { return waits[int(q*float64(len(waits)-1))] }
	var lastSmall time.Time
	for _, st := range started {
		if st.After(lastSmall) {
			lastSmall = st
		}
	}
	// The big key's jobs not yet started when the last small key's job did.
	left, _ := slices.BinarySearchFunc(bigStarts, lastSmall, time.Time.Compare)
	left = big - left
	t.Logf("backlog of %d jobs on one key, %d keys of one job each (one every %v), %d clients x %d workers, handlers of %v-%v: waits p50 %v, p99 %v, max %v; at most %d of the big key's jobs started while one of them waited; %d of the big key's jobs were still waiting when the last of them started",
		big, small, spacing, clients, workers, work, 2*work, p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond), last.Round(time.Millisecond), worstBetween, left)
	if left == 0 {
		t.Errorf("the big key's backlog ran out before the last small key's job started: nothing was tested against a backlog")
	}
	// Claims in flight when a job is enqueued may each take a claim's
	// worth of the big key (at most the free workers of a client), and so
	// may the claim that serves the big key next; then the job goes first.
	if bound := 3 * clients * workers; worstBetween > bound {
		t.Errorf("the big key started %d jobs while a small key's job waited, want at most %d (a few claims): the backlog held it back", worstBetween, bound)
	}
	if *turnsSoak && p(0.99) > 100*time.Millisecond {
		t.Errorf("p99 of the small keys' waits is %v, want at most 100 ms", p(0.99))
	}
}

// TestTurnsShareEqually: keys whose backlogs were enqueued one key after
// another (so that run-at order alone would serve them one at a time)
// share the workers: per second of the run, Jain's index of the keys'
// starts, (Σx)² / (n·Σx²), 1 when every key started as many jobs and 1/n
// when one key started them all. The indexes go to the log; with
// -turns.soak, at full scale, each second's must be at least 0.95.
//
//	go test -run TestTurnsShareEqually -count=1 -v . -args -turns.soak
func TestTurnsShareEqually(t *testing.T) {
	keys, perKey, clients, workers, run := 20, 3_000, 2, 16, 3*time.Second
	if *turnsSoak {
		keys, perKey, clients, workers, run = 100, 5_000, 4, 32, 20*time.Second
	}
	starts := runBacklogs(t, keys, perKey, clients, workers, run, nil)
	var first, last time.Time
	total := 0
	for _, ss := range starts {
		for _, s := range ss {
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
		}
		total += len(ss)
	}
	var indexes []float64
	for w0 := first.Add(time.Second); !w0.Add(time.Second).After(last); w0 = w0.Add(time.Second) {
		var sum, squares float64
		for k := range keys {
			n := 0
			for _, s := range starts[fmt.Sprint("t:", k)] {
				if !s.Before(w0) && s.Before(w0.Add(time.Second)) {
					n++
				}
			}
			sum += float64(n)
			squares += float64(n) * float64(n)
		}
		if squares > 0 {
			indexes = append(indexes, sum*sum/(float64(keys)*squares))
		}
	}
	if len(indexes) == 0 {
		t.Fatalf("%d starts over %v: no whole second to measure", total, last.Sub(first))
	}
	drained := 0
	for k := range keys {
		if len(starts[fmt.Sprint("t:", k)]) == perKey {
			drained++
		}
	}
	sorted := slices.Clone(indexes)
	slices.Sort(sorted)
	t.Logf("%d keys of %d jobs each, enqueued one key after another; %d clients x %d workers, handlers of 2-4 ms, %v: %d starts; Jain's index per second: min %.3f, median %.3f over %d seconds; %d keys drained",
		keys, perKey, clients, workers, run, total, sorted[0], sorted[len(sorted)/2], len(sorted), drained)
	t.Log(claimSpread(starts))
	if drained > 0 {
		t.Errorf("%d keys ran out of jobs during the run: the index would measure less than a backlog", drained)
	}
	if *turnsSoak && sorted[0] < 0.95 {
		t.Errorf("Jain's index fell to %.3f in a second, want at least 0.95 in each: %v", sorted[0], indexes)
	}
}

// claimSpread describes how the claims of a run spread their jobs over
// the keys, from each key's start times (the jobs of one claim share its
// time): how many keys a claim served, how many jobs of one key it took,
// and how long keys went between two claims that served them.
func claimSpread(starts map[string][]time.Time) string {
	claims := map[time.Time]map[string]int{}
	var gaps []time.Duration
	for key, ss := range starts {
		ss = slices.Clone(ss)
		slices.SortFunc(ss, time.Time.Compare)
		var longest time.Duration
		for i, s := range ss {
			if claims[s] == nil {
				claims[s] = map[string]int{}
			}
			claims[s][key]++
			if i > 0 {
				longest = max(longest, s.Sub(ss[i-1]))
			}
		}
		gaps = append(gaps, longest)
	}
	if len(claims) == 0 {
		return "no claims"
	}
	var keys, jobs, lumpy int
	var most []int
	for _, c := range claims {
		n, top := 0, 0
		for _, k := range c {
			n += k
			top = max(top, k)
		}
		keys += len(c)
		jobs += n
		if n >= 2*len(c) {
			lumpy++
		}
		most = append(most, top)
	}
	slices.Sort(most)
	slices.Sort(gaps)
	return fmt.Sprintf("%d claims: %.1f jobs of %.1f keys on average; %.0f%% took two or more jobs of each key they served; the most jobs of one key in a claim: median %d, p90 %d; each key's longest wait between two claims that served it: median %v, longest %v",
		len(claims), float64(jobs)/float64(len(claims)), float64(keys)/float64(len(claims)), 100*float64(lumpy)/float64(len(claims)),
		most[len(most)/2], most[len(most)*9/10], gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
}

// runBacklogs enqueues perKey jobs to each of keys keys ("t:0", "t:1",
// ...; governed by limits with no concurrency bound, or -turns.bound), one key after
// another, with weight(k) as key k's weight (nil: 1),
// lets clients x workers work them for run and returns each key's starts.
func runBacklogs(t *testing.T, keys, perKey, clients, workers int, run time.Duration, weight func(k int) int) map[string][]time.Time {
	t.Helper()
	ctx := context.Background()
	base, url := newPGStoreURL(t)
	if _, err := base.PutLimit(ctx, readpast.Limit{Key: "t:*", Concurrency: *turnsBound}); err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		if weight != nil && weight(k) != 1 {
			l := readpast.Limit{Key: fmt.Sprint("t:", k), Concurrency: *turnsBound, Weight: weight(k)}
			if _, err := base.PutLimit(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k := range keys {
		enqueueKeyed(t, base, fmt.Sprint("t:", k), perKey)
	}
	var (
		mu     sync.Mutex
		starts = map[string][]time.Time{}
	)
	w := readpast.NewWorkers()
	w.Handle("work", func(ctx context.Context, job *readpast.Job) (any, error) {
		mu.Lock()
		starts[*job.Group] = append(starts[*job.Group], *job.StartedAt)
		mu.Unlock()
		time.Sleep(2*time.Millisecond + rand.N(2*time.Millisecond))
		return nil, nil
	}, nil)
	cs := startPGClients(t, url, clients, workers, w)
	time.Sleep(run)
	for _, c := range cs {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c.Stop(sctx)
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	return starts
}

// TestWeightedShares: backlogged keys of weights 1 to 4 share the
// workers in proportion to their weights. Each key's starts over the run,
// divided by its weight, should be equal: Jain's index of those is logged
// and must be at least 0.95 with -turns.soak (32 keys, 4 clients x 32
// workers, 20 s); the short mode checks that the keys of weight 4 start
// at least twice as many jobs as those of weight 1.
//
//	go test -run TestWeightedShares -count=1 -v . -args -turns.soak
func TestWeightedShares(t *testing.T) {
	keys, perKey, clients, workers, run := 8, 3_000, 2, 16, 3*time.Second
	if *turnsSoak {
		keys, perKey, clients, workers, run = 32, 8_000, 4, 32, 20*time.Second
	}
	weight := func(k int) int { return k%4 + 1 }
	starts := runBacklogs(t, keys, perKey, clients, workers, run, weight)
	var sum, squares float64
	byWeight := map[int]int{}
	for k := range keys {
		n := len(starts[fmt.Sprint("t:", k)])
		if n == perKey {
			t.Fatalf("key t:%d ran out of jobs: the shares would measure less than a backlog", k)
		}
		byWeight[weight(k)] += n
		x := float64(n) / float64(weight(k))
		sum += x
		squares += x * x
	}
	jain := sum * sum / (float64(keys) * squares)
	t.Logf("%d keys of weights 1-4, %d clients x %d workers, %v: starts by weight %v; Jain's index of starts per unit of weight %.3f",
		keys, clients, workers, run, byWeight, jain)
	// Shares follow weights roughly (docs/design/flow-control.md): weight
	// 4 starts about 2.5 times weight 1 on an idle machine, and 2 times
	// under CI's load. 1.5 times still fails when weights are ignored
	// (about 1 time).
	if 2*byWeight[4] < 3*byWeight[1] {
		t.Errorf("keys of weight 4 started %d jobs, those of weight 1 %d: want at least 1.5 times as many", byWeight[4], byWeight[1])
	}
	if *turnsSoak && jain < 0.95 {
		t.Errorf("Jain's index of starts per unit of weight %.3f, want at least 0.95", jain)
	}
}

// enqueueKeyed enqueues n jobs of kind "work" to key, a thousand a call.
func enqueueKeyed(t *testing.T, s readpast.Store, key string, n int) {
	t.Helper()
	for done := 0; done < n; done += 1000 {
		ps := make([]readpast.EnqueueParams, min(1000, n-done))
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "work", Group: key}
		}
		if _, err := s.Enqueue(context.Background(), ps); err != nil {
			t.Fatal(err)
		}
	}
}
