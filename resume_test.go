package readpast_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// outageStore fails every Claim while the database is "away", and records,
// per worker, when its first claim after the return went through.
type outageStore struct {
	readpast.Store
	notify *sqlite.Store // wake-ups, when wakes is set

	mu       sync.Mutex
	away     bool
	back     time.Time            // when the database returned
	resumed  map[string]time.Time // worker -> first claim after back
	attempts map[string]int       // worker -> claims tried while away
}

var errAway = errors.New("connection refused (test outage)")

func (s *outageStore) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	s.mu.Lock()
	if s.away {
		s.attempts[p.Worker]++
		s.mu.Unlock()
		return nil, errAway
	}
	if _, ok := s.resumed[p.Worker]; !ok && !s.back.IsZero() {
		s.resumed[p.Worker] = time.Now()
	}
	s.mu.Unlock()
	return s.Store.Claim(ctx, p)
}

func (s *outageStore) setAway(away bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.away = away
	if !away {
		s.back = time.Now()
	}
}

// wakingStore is an outageStore that also passes wake-ups on.
type wakingStore struct{ *outageStore }

func (s wakingStore) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	return s.notify.Subscribe(ctx)
}

// TestClientsResumeSoonAfterAnOutage takes the database away from eight
// clients for 7 s (long enough for a doubling backoff to reach any cap
// below that) and brings it back: every client claims again within a
// second, and not all at the same instant. Before, the backoff doubled to
// 5 s without jitter: clients came back up to 5 s late, in lockstep. A
// second case wakes the clients at the return: they claim at once.
func TestClientsResumeSoonAfterAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 7 s outage")
	}
	for _, wake := range []bool{false, true} {
		t.Run(fmt.Sprintf("wake=%v", wake), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sq := newSQLiteStore(t)
			o := &outageStore{Store: sq, notify: sq, resumed: map[string]time.Time{}, attempts: map[string]int{}}
			var st readpast.Store = o
			if wake {
				st = wakingStore{o}
			}
			w := readpast.NewWorkers()
			w.Handle("k", func(context.Context, *readpast.Job) (any, error) { return nil, nil }, nil)
			o.setAway(true)
			const clients = 8
			for i := range clients {
				// Polling once a minute: only the backoff (or a wake-up)
				// brings a client back.
				startClient(t, st, readpast.Config{Workers: w, WorkerID: fmt.Sprint("c", i), PollInterval: time.Minute, RescueInterval: -1})
			}
			time.Sleep(7 * time.Second)
			o.setAway(false)
			from := o.back // what the resumes are measured from
			if wake {
				// What a store's listener does when it is connected again.
				if _, err := sq.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
					t.Fatal(err)
				}
				// From the wake-up: the enqueue itself takes tens of
				// milliseconds under -race on a loaded machine.
				from = time.Now()
			}
			waitFor(t, 10*time.Second, "every client to claim again", func() bool {
				o.mu.Lock()
				defer o.mu.Unlock()
				return len(o.resumed) == clients
			})
			o.mu.Lock()
			defer o.mu.Unlock()
			var after []time.Duration
			for id, at := range o.resumed {
				after = append(after, at.Sub(from))
				if o.attempts[id] < 3 {
					t.Errorf("client %s tried only %d claims in 7 s of outage", id, o.attempts[id])
				}
			}
			slices.Sort(after)
			t.Logf("claims resumed after %v", after)
			// Without the wake-up each client comes back when its backoff
			// (400-800 ms at the cap) ends; clients in lockstep came back
			// after 5 s.
			limit := 1500 * time.Millisecond
			if wake {
				// With it they claim at once, give or take the scheduling
				// of a loaded 2-core machine. Without it, all eight within
				// 500 ms has a chance of (100/400)^8, under 1 in 60,000.
				limit = 500 * time.Millisecond
			}
			if last := after[len(after)-1]; last > limit {
				t.Errorf("the last client claimed again %v after the database returned (wake=%v), want within %v", last, wake, limit)
			}
			if !wake && after[len(after)-1]-after[0] < 20*time.Millisecond {
				t.Errorf("clients came back within %v of each other: no jitter", after[len(after)-1]-after[0])
			}
		})
	}
}
