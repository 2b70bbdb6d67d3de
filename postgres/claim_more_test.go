package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
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

// TestShortClaimPastAKeysMarksLooksAgain: a claim whose walk of ready
// marks ends on marks of one key (each enqueue behind its backlog marks
// it again) comes back short, and the other keys' due jobs are past its
// walk: the store must look again. m:a (one at a time) has three jobs,
// each enqueued on its own, m:b one; a claim of two walks m:a's first two
// marks and takes one job. Its note must name m:b's job and wake the
// store's claimers. Read among the first three marks only (m:a's), the
// note said nothing, and a client slept until its poll.
func TestShortClaimPastAKeysMarksLooksAgain(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "m:*", Concurrency: 1})
	for _, key := range []string{"m:a", "m:a", "m:a", "m:b"} {
		keyJobs(t, s, key, "q", 1)
	}
	shortClaimWakes(t, s, 2, []string{"m:a"}, "m:b")
}

// TestShortClaimPastFullKeysLooksAgain: the same past the marks of full
// keys. m:a and m:b run their one job each; their next jobs and m:c's are
// enqueued one by one (marks a, b, a, b, c). A claim of two walks the
// first two, holds both full keys and takes nothing; m:c's job is past
// its walk, and the note must name it.
func TestShortClaimPastFullKeysLooksAgain(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "m:*", Concurrency: 1})
	keyJobs(t, s, "m:a", "q", 1)
	keyJobs(t, s, "m:b", "q", 1)
	if got, err := s.Claim(context.Background(), claimQ("w", 2, "q")); err != nil || len(got) != 2 {
		t.Fatalf("the first claim took %v (%v), want m:a's and m:b's jobs", describe(got), err)
	}
	for _, key := range []string{"m:a", "m:b", "m:a", "m:b", "m:c"} {
		keyJobs(t, s, key, "q", 1)
	}
	shortClaimWakes(t, s, 2, nil, "m:c")
}

// shortClaimWakes claims limit jobs of queue q, which must take one job
// of each key of took, then waits for the store's wake-up, after which a
// claim must take the job of key next.
func shortClaimWakes(t *testing.T, s *postgres.Store, limit int, took []string, next string) {
	t.Helper()
	ctx := context.Background()
	wake, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the enqueues' wake-ups pass
	for len(wake) > 0 {
		<-wake
	}
	got, err := s.Claim(ctx, claimQ("w", limit, "q"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, j := range got {
		keys = append(keys, groupName(j.Group))
	}
	if !slices.Equal(keys, took) {
		t.Fatalf("a claim of %d took %v, want a job of each of %v", limit, describe(got), took)
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatalf("no wake-up within 2 s of a short claim that passed over %s's due job", next)
	}
	again, err := s.Claim(ctx, claimQ("w", limit, "q"))
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || groupName(again[0].Group) != next {
		t.Fatalf("the claim after the wake-up took %v, want %s's job", describe(again), next)
	}
}
