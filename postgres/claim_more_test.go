package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestShortKeyedClaimLooksAgain: a claim of keyed jobs that comes back
// short because a concurrent claim holds another key's ready mark leaves
// that key's jobs claimable once the other claim commits, and nothing
// announces them. Key k:1 has two jobs, k:2 one; a claim of one job from a
// second store stops with k:1's mark locked (claim.group_rows). A client
// (poll interval an hour) claims two: it takes k:2's job and passes k:1's
// mark over, a short claim. The stalled claim then takes k:1's first job
// and marks k:1 again. The client must start k:1's second job without a
// wake-up or a poll: its store looks again after short claims that passed
// due marks over (claimmore.go). Without that, the client takes its short
// claim as the end of the backlog and sleeps for the hour.
func TestShortKeyedClaimLooksAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "k:*"}) // no bound: completions wake nobody
	keyJobs(t, s, "k:1", "q", 2)
	keyJobs(t, s, "k:2", "q", 1)

	st := newStall(t, s, "claim.group_rows")
	var held []*readpast.Job
	doneA := async(func() error {
		var err error
		held, err = st.store.Claim(ctx, claimQ("a", 1, "q"))
		return err
	})
	st.waitBlocked() // k:1's mark, the oldest, is locked

	var (
		mu      sync.Mutex
		started = map[string]int{}
		k1Again = make(chan struct{})
	)
	w := readpast.NewWorkers()
	w.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		started[*j.Group]++
		if *j.Group == "k:1" {
			close(k1Again)
		}
		return nil, nil
	}, nil)
	c, err := readpast.NewClient(s, readpast.Config{
		Workers:      w,
		Queues:       map[string]readpast.QueueConfig{"q": {MaxWorkers: 2}},
		PollInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	// The client takes k:2's job and passes k:1's mark over; a loaded
	// machine may take seconds to plan its first claim. Then the wake-ups
	// of its store's listener starting are given time to be over.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := started["k:2"]
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	if started["k:2"] != 1 || started["k:1"] != 0 {
		mu.Unlock()
		t.Fatalf("before the stalled claim went on, the client started %v, want k:2's job alone", started)
	}
	mu.Unlock()

	st.open()
	within(t, "the stalled claim", 5*time.Second, doneA)
	if len(held) != 1 || groupName(held[0].Group) != "k:1" {
		t.Fatalf("the stalled claim took %v, want k:1's first job", describe(held))
	}
	select {
	case <-k1Again:
	case <-time.After(5 * time.Second):
		t.Fatal("k:1's second job, claimable since the stalled claim committed, did not start within 5 s (poll interval an hour)")
	}
	checkGroups(t, s)
}
