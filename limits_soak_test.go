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
	"github.com/readpast/readpast/postgres"
)

var limitsSoak = flag.Duration("limits.soak", 0,
	"run TestLimitsSoak for this long (0: the short mode, 10 s)")

// TestLimitsSoak: clients on separate stores (as separate processes
// would be), 32 workers each, drain 40 keys of a template with a rate of
// 20 starts a second, bursts of 5 and a concurrency of 5, kept
// backlogged, handlers taking 1-20 ms. Over the whole run, from the
// started_at each job records: no key ever starts more than its rate
// allows over any span between two of its starts, and none runs more than
// 5 at once. With -limits.soak, each key must also achieve at least 97%
// of its rate in every 10-second window; the short mode, part of the
// default run, only logs the rate achieved over the run (after the first
// second's burst), since a loaded machine may fall behind. The figures go
// to the log.
//
//	go test -run TestLimitsSoak -count=1 -v . -args -limits.soak 10m
func TestLimitsSoak(t *testing.T) {
	d := *limitsSoak
	if d == 0 {
		d = 10 * time.Second
	}
	const (
		clients, workers = 4, 32
		keys, rate       = 40, 20
		burst, conc      = 5, 5
		interval         = time.Second / rate
	)
	ctx := context.Background()
	base, url := newPGStoreURL(t)
	if _, err := base.PutLimit(ctx, readpast.Limit{Key: "k:*", Concurrency: conc, Rate: rate, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	type run struct {
		start, end time.Time
	}
	var (
		mu   sync.Mutex
		runs = map[string][]run{}
	)
	w := readpast.NewWorkers()
	w.Handle("call", func(ctx context.Context, job *readpast.Job) (any, error) {
		time.Sleep(time.Millisecond + rand.N(19*time.Millisecond))
		mu.Lock()
		runs[*job.Group] = append(runs[*job.Group], run{*job.StartedAt, time.Now()})
		mu.Unlock()
		return nil, nil
	}, nil)
	// Keep every key backlogged: a second and a half of its rate ahead.
	enqueueAhead := func(n int) {
		var ps []readpast.EnqueueParams
		for k := range keys {
			for range n {
				ps = append(ps, readpast.EnqueueParams{Kind: "call", Group: fmt.Sprint("k:", k)})
			}
		}
		if _, err := base.Enqueue(ctx, ps); err != nil {
			t.Error(err)
		}
	}
	enqueueAhead(rate * 3 / 2)
	cs := startPGClients(t, url, clients, workers, w)
	began := time.Now()
	tick := time.NewTicker(time.Second)
	for time.Since(began) < d {
		<-tick.C
		enqueueAhead(rate)
	}
	tick.Stop()
	end := time.Now()
	var stops sync.WaitGroup
	for _, c := range cs {
		stops.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c.Stop(sctx)
		})
	}
	stops.Wait()

	mu.Lock()
	defer mu.Unlock()
	var worst float64 = 1e9
	var starts, windows int
	var longest time.Duration // between two starts of a key
	for k := range keys {
		key := fmt.Sprint("k:", k)
		rs := runs[key]
		slices.SortFunc(rs, func(a, b run) int { return a.start.Compare(b.start) })
		starts += len(rs)
		for i := 1; i < len(rs); i++ {
			longest = max(longest, rs[i].start.Sub(rs[i-1].start))
		}
		// The rate, exactly, on the database's clock.
		for i := range rs {
			for j := i + burst; j < len(rs); j++ {
				span := rs[j].start.Sub(rs[i].start)
				if j-i+1 > int(span/interval)+burst {
					t.Fatalf("key %s: %d starts within %s", key, j-i+1, span)
				}
				if span > 2*time.Second {
					break
				}
			}
		}
		// The concurrency: starts and ends (handler returns, before the
		// completion is written: a lower bound of the slot's end).
		type edge struct {
			at time.Time
			d  int
		}
		var es []edge
		for _, r := range rs {
			es = append(es, edge{r.start, 1}, edge{r.end, -1})
		}
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.d - b.d
		})
		n := 0
		for _, e := range es {
			if n += e.d; n > conc {
				t.Fatalf("key %s: %d running at %s", key, n, e.at)
			}
		}
		// The rate achieved: per 10-second window, or over the run after
		// its first second in the short mode.
		win := 10 * time.Second
		from := began.Add(time.Second)
		if d < 2*win {
			win = end.Sub(from)
		}
		for w0 := from; !w0.Add(win).After(end); w0 = w0.Add(win) {
			got := 0
			for _, r := range rs {
				if !r.start.Before(w0) && r.start.Before(w0.Add(win)) {
					got++
				}
			}
			frac := float64(got) / (win.Seconds() * rate)
			worst = min(worst, frac)
			windows++
			if *limitsSoak > 0 && frac < 0.97 {
				t.Errorf("key %s: %d starts in the %s from %s, %.1f%% of its rate", key, got, win, w0.Sub(began).Round(time.Second), 100*frac)
			}
		}
	}
	t.Logf("%d keys at %d/s (burst %d, concurrency %d), %d clients x %d workers, %s: %d starts, 0 over the rate, 0 over the concurrency; the lowest window (%d windows) achieved %.1f%% of its rate; the longest pause between two starts of a key was %s (tokens are lost past %s)",
		keys, rate, burst, conc, clients, workers, d, starts, windows, 100*worst, longest.Round(time.Millisecond), time.Duration(burst)*interval)
}

// startPGClients starts n clients of w, each on a store of its own on the
// PostgreSQL database at url (as separate processes would be), with
// workers workers on the default queue. The stores close when the test
// ends; the caller stops the clients.
func startPGClients(t *testing.T, url string, n, workers int, w *readpast.Workers) []*readpast.Client {
	t.Helper()
	ctx := context.Background()
	var cs []*readpast.Client
	for range n {
		s, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		c, err := readpast.NewClient(s, readpast.Config{Workers: w, Queues: map[string]readpast.QueueConfig{
			readpast.DefaultQueue: {MaxWorkers: workers}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}
