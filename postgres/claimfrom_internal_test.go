package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestClaimPositionInterleavings replays, on the store's bookkeeping, the
// interleavings of claims in flight with full claims and enqueues that
// could leave the position past a pending job (claimfrom.go): the claims'
// snapshots are the premise (a claim does not see what committed after it
// began), so what matters is what the store does with their results.
func TestClaimPositionInterleavings(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	job := func(id int64, priority int, at time.Duration) *readpast.Job {
		return &readpast.Job{ID: id, Queue: "q", Priority: priority, RunAt: t0.Add(at)}
	}
	q := []string{"q"}
	setup := func() (*claimFrom, time.Time) {
		c := &claimFrom{fullEvery: time.Hour}
		now := time.Now()
		st := c.start(q, 10, now)
		if st.positioned {
			t.Fatal("the first claim starts after a position")
		}
		c.claimed(st, []*readpast.Job{job(1, 0, 0), job(2, 0, time.Second)})
		return c, now
	}
	positionIs := func(c *claimFrom, id int64) {
		t.Helper()
		if got := c.queues["q"].at.id; got != id {
			t.Fatalf("the position is at job %d, want %d", got, id)
		}
	}

	t.Run("a positioned claim ending after a full one", func(t *testing.T) {
		c, now := setup()
		p := c.start(q, 10, now)
		if !p.positioned {
			t.Fatal("the second claim starts at the head")
		}
		// The interval passes: the next claim is a full one. It finds an
		// urgent job another process enqueued ahead, and stops there
		// (its limit).
		f := c.start(q, 10, now.Add(2*time.Hour))
		if f.positioned {
			t.Fatal("once the interval passed, the next claim starts after the position")
		}
		c.claimed(f, []*readpast.Job{job(10, -1, 0)})
		positionIs(c, 10)
		c.claimed(p, []*readpast.Job{job(3, 0, 2*time.Second)}) // the positioned one ends last
		positionIs(c, 10)                                       // before the fix: 3, past whatever the full claim left
	})

	t.Run("a claim ending past a job enqueued while it ran", func(t *testing.T) {
		c, now := setup()
		p := c.start(q, 10, now)
		// Within the position's reach when enqueued (after job 2), beyond
		// it once the claim (which did not see it) moves the position to
		// job 9, a minute later.
		c.enqueued([]*readpast.Job{job(20, 0, 2*time.Second)})
		c.claimed(p, []*readpast.Job{job(9, 0, time.Minute)})
		if next := c.start(q, 10, now); next.positioned {
			t.Fatal("after a claim that ended beyond the reach of a job enqueued while it ran, the next claim starts after its position")
		}
	})

	t.Run("an enqueue within the slack needs no full claim", func(t *testing.T) {
		c, now := setup()
		p := c.start(q, 10, now)
		c.enqueued([]*readpast.Job{job(30, 0, 950*time.Millisecond)}) // 50 ms before job 2
		c.claimed(p, []*readpast.Job{job(3, 0, time.Second+10*time.Millisecond)})
		positionIs(c, 3)
		if next := c.start(q, 10, now); !next.positioned {
			t.Fatal("a job within the slack window made the next claim a full one")
		}
	})

	t.Run("failed full claims count toward the interval", func(t *testing.T) {
		c, _ := setup()
		c.fullEvery = 0
		for i := range 2 { // one slow claim could be a fluke; two are not
			c.ahead()
			f := c.start(q, 10, time.Now().Add(-5*time.Second)) // a full claim that ran 5 s
			if f.positioned {
				t.Fatal("after ahead, the next claim starts after the position")
			}
			c.claimed(f, nil) // and failed
			if got := c.queues["q"].full.took; i == 0 && got >= 5*time.Second {
				t.Fatalf("one full claim of 5 s spaces the next ones out by %v", got)
			}
		}
		if got := c.queues["q"].full.took; got < 5*time.Second {
			t.Fatalf("two failed full claims of 5 s are recorded as %v", got)
		}
		if got := c.interval(c.queues["q"].full.took); got != claimFullMax {
			t.Fatalf("after a failed full claim of 5 s, the next comes within %v, want %v", got, claimFullMax)
		}
	})
}

// TestShortPositionedClaimWakes: a positioned claim that comes back short
// may have missed a job put ahead of the position by another process; the
// store then wakes its claimers when the next full claim is due (at once
// when it is due by the time the short claim ends), once however many
// short claims there are meanwhile. A full claim that comes back short
// asks for nothing: it missed nothing.
func TestShortPositionedClaimWakes(t *testing.T) {
	for _, ago := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprint("full claim ", ago, " ago"), func(t *testing.T) { shortPositionedClaimWakes(t, ago) })
	}
}

func shortPositionedClaimWakes(t *testing.T, ago time.Duration) {
	woken := make(chan time.Time, 10)
	c := &claimFrom{fullEvery: 50 * time.Millisecond, wake: func() { woken <- time.Now() }}
	q := []string{"q"}
	job := &readpast.Job{ID: 1, Queue: "q", RunAt: time.Now().Add(-time.Hour)}
	// The claims' clock reads are given, a millisecond apart: the short
	// claims began within the interval, and end before the next full
	// claim is due (ago 0, unless the machine stalls for 50 ms) or after
	// it (ago 1 s).
	t0 := time.Now().Add(-ago)
	full := c.start(q, 10, t0)
	c.claimed(full, []*readpast.Job{job})
	began := time.Now()
	for i := range 3 {
		p := c.start(q, 10, t0.Add(time.Duration(i+1)*time.Millisecond))
		if !p.positioned {
			t.Fatal("a claim within the interval starts at the head")
		}
		c.claimed(p, nil)
	}
	select {
	case at := <-woken:
		if d := at.Sub(began); d > time.Second {
			t.Fatalf("woken %v after the short claims; the next full claim was due within 50 ms", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a short positioned claim did not wake the claimers when the next full claim was due")
	}
	select {
	case <-woken:
		t.Fatal("three short claims before the same full claim woke the claimers twice")
	case <-time.After(150 * time.Millisecond):
	}
	f := c.start(q, 10, time.Now())
	if f.positioned {
		t.Fatal("once the interval passed, the claim starts after the position")
	}
	c.claimed(f, nil)
	select {
	case <-woken:
		t.Fatal("a short full claim woke the claimers")
	case <-time.After(150 * time.Millisecond):
	}
}
