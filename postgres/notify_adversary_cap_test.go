package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestAdvNotifyEachClaimsTimesAnnounced: two claims that finish within one
// notifyEvery window each leave 150 keys out of tokens, with 150 distinct
// next starts each. Each claim's list (up to 256) goes out in a NOTIFY of
// its own: merged into one window's NOTIFY, cut to its earliest 256, other
// processes would never hear of the rest.
func TestAdvNotifyEachClaimsTimesAnnounced(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	const keys = 300
	queue := func(k int) string {
		if k < keys/2 {
			return "a"
		}
		return "b"
	}
	// Each key's token spent by a claim of its own: distinct next starts.
	for k := range keys {
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: queue(k), Keys: []string{fmt.Sprint("r:", k)}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{queue(k)}, Worker: "w", Limit: 1, Lease: time.Hour})
		if err != nil || len(got) != 1 {
			t.Fatalf("key %d: claimed %d, %v", k, len(got), err)
		}
	}
	var ps []readpast.EnqueueParams
	for k := range keys {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: queue(k), Keys: []string{fmt.Sprint("r:", k)}})
	}
	// And a plain job in each queue, so that both claims stop at their
	// last step (claim.end) and finish together when the gate opens.
	ps = append(ps, readpast.EnqueueParams{Kind: "plain", Queue: "a"}, readpast.EnqueueParams{Kind: "plain", Queue: "b"})
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	st := newStall(t, s, "claim.end")
	l := advNotifyListen(t, s)
	time.Sleep(50 * time.Millisecond)
	advNotifyHeard(l, 300*time.Millisecond)

	var wg sync.WaitGroup
	for _, q := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := st.store.Claim(ctx, readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 200, Lease: time.Hour})
			if err != nil || len(got) != 1 {
				t.Errorf("queue %s: claimed %d, %v", q, len(got), err)
			}
		}()
	}
	waitStalled(t, st, 2)
	st.open()
	wg.Wait()
	var marked int
	if err := s.Pool().QueryRow(ctx, "SELECT count(DISTINCT run_at) FROM readpast_group_ready WHERE run_at > now()").Scan(&marked); err != nil {
		t.Fatal(err)
	}
	times := map[string]bool{}
	for _, p := range advNotifyHeard(l, time.Second) {
		if list, ok := strings.CutPrefix(p, "due:"); ok {
			for _, f := range strings.Split(list, ",") {
				times[f] = true
			}
		}
	}
	t.Logf("distinct next starts marked: %d; announced to other processes: %d", marked, len(times))
	if len(times) < marked {
		t.Errorf("%d of %d keys' next starts never announced to other processes", marked-len(times), marked)
	}
}
