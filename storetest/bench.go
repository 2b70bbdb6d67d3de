package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// GroupsAtScale configures BenchClaimGroupsAtScale.
type GroupsAtScale struct {
	// Groups backlogged, each with JobsPerGroup pending jobs; all but Free
	// of them run a job, so every claim finds Free claimable heads among
	// Groups-Free full groups.
	Groups, JobsPerGroup, Free int
	// Limit is the claim limit.
	Limit int
	// Throttled makes half of the busy groups (every other one) out of
	// tokens instead of running a job: a template gives every group a
	// rate of one start an hour; the free groups have limits of their own
	// without a rate.
	Throttled bool
	// Ready, if set, runs once the state is built, before the timer
	// starts (a VACUUM, an EXPLAIN).
	Ready func(b *testing.B)
	// Done, if set, runs after the timed claims, the timer stopped (an
	// EXPLAIN of a claim in the steady state the claims leave).
	Done func(b *testing.B)
	// Bare leaves out the store's vacuums. Otherwise, when the store is
	// a readpast.Tidier, its Tidy runs every second beside the timed
	// claims, as RunRescuer runs it in every Client and in `readpast
	// serve` by default: it vacuums the tables whose dead rows the claims
	// would otherwise walk.
	Bare bool
}

// BenchClaimGroupsAtScale measures a claim's cost when most groups are
// full: it enqueues c.Groups x c.JobsPerGroup grouped jobs, claims one job
// of every group but c.Free, then times claims of up to c.Limit jobs (each
// must take one job of each of min(c.Free, c.Limit) free groups; what it
// took is completed and each group given one more job, untimed, so the
// state stays the same).
// It reports ms/claim.
//
// It does not release what it took: a release marks the job twice (its
// own mark, and the freed slot's), and a claim that walks c.Limit marks
// would then find c.Limit/2 groups.
func BenchClaimGroupsAtScale(b *testing.B, s readpast.Store, c GroupsAtScale) {
	ctx := context.Background()
	start := time.Now()
	busy := c.Groups - c.Free
	if c.Throttled {
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g*", Concurrency: 1, Rate: 1, Per: time.Hour, Burst: 1}); err != nil {
			b.Fatal(err)
		}
		for g := busy; g < c.Groups; g++ {
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: fmt.Sprint("g", g), Concurrency: 1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	const batch = 5000
	var ps []readpast.EnqueueParams
	flush := func() {
		if _, err := s.Enqueue(ctx, ps); err != nil {
			b.Fatal(err)
		}
		ps = ps[:0]
	}
	for j := range c.JobsPerGroup {
		for g := range c.Groups {
			ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: fmt.Sprint("g", g), Payload: []byte(fmt.Sprintf(`{"j":%d}`, j))})
			if len(ps) == batch {
				flush()
			}
		}
	}
	if len(ps) > 0 {
		flush()
	}
	for taken := 0; taken < busy; {
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "setup", Limit: min(1000, busy-taken), Lease: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatalf("setup stalled at %d busy groups", taken)
		}
		taken += len(got)
		if !c.Throttled {
			continue
		}
		var done []readpast.Completion
		for i, j := range got {
			if i%2 == 0 { // its token spent, its slot free again
				done = append(done, readpast.Completion{ID: j.ID, Token: j.Token})
			}
		}
		if _, err := s.Complete(ctx, done); err != nil {
			b.Fatal(err)
		}
	}
	if c.Ready != nil {
		c.Ready(b)
	}
	b.Logf("setup: %d groups x %d jobs, %d busy (throttled: %v), in %v", c.Groups, c.JobsPerGroup, busy, c.Throttled, time.Since(start).Round(time.Millisecond))
	if td, ok := s.(readpast.Tidier); ok && !c.Bare {
		// The store's vacuums, every second, as RunRescuer calls Tidy in
		// every client (its rescues and prunes are left out: there is
		// nothing to rescue, and a prune would lock idle key rows that
		// a claim then passes over).
		tctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-tctx.Done():
					return
				case <-tick.C:
				}
				if _, err := td.Tidy(tctx); err != nil && tctx.Err() == nil {
					b.Error(err)
				}
			}
		}()
		defer func() {
			b.StopTimer()
			stop()
			<-done
		}()
	}
	p := readpast.ClaimParams{Worker: "bench", Limit: c.Limit, Lease: time.Hour}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		began := time.Now()
		got, err := s.Claim(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(began))
		b.StopTimer()
		if want := min(c.Free, c.Limit); len(got) != want {
			b.Fatalf("claimed %d jobs, want one of each of %d of the %d free groups", len(got), want, c.Free)
		}
		cs := make([]readpast.Completion, len(got))
		more := make([]readpast.EnqueueParams, len(got))
		for i, j := range got {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
			more[i] = readpast.EnqueueParams{Kind: "k", Group: *j.Group}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Enqueue(ctx, more); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	if c.Done != nil {
		c.Done(b)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/claim")
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms/claim")
	b.ReportMetric(float64(times[(len(times)*99)/100].Microseconds())/1000, "p99-ms/claim")
}

// BenchEnqueueUnique measures enqueueing batches of size jobs: without
// keys, with a fresh key each, and with keys that are all held
// (duplicates). Each b.N is one batch.
func BenchEnqueueUnique(b *testing.B, s readpast.Store, size int) {
	ctx := context.Background()
	batch := func(prefix string, n int) []readpast.EnqueueParams {
		ps := make([]readpast.EnqueueParams, size)
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "bench"}
			if prefix != "" {
				ps[i].UniqueKey = fmt.Sprintf("%s-%d-%d", prefix, n, i)
			}
		}
		return ps
	}
	for _, mode := range []string{"no-key", "new-key", "duplicate"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "duplicate" {
				if _, err := s.Enqueue(ctx, batch("dup", 0)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for n := range b.N {
				var ps []readpast.EnqueueParams
				switch mode {
				case "no-key":
					ps = batch("", n)
				case "new-key":
					ps = batch("new", n)
				default:
					ps = batch("dup", 0)
				}
				if _, err := s.Enqueue(ctx, ps); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*size), "us/job")
		})
	}
}
