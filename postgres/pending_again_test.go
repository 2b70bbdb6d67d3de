package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// claimWatch is a store that tells when a claim begins, and how many are
// in flight.
type claimWatch struct {
	*postgres.Store
	began    chan struct{}
	inFlight *atomic.Int32
}

func (w claimWatch) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	w.inFlight.Add(1)
	defer w.inFlight.Add(-1)
	select {
	case w.began <- struct{}{}:
	default:
	}
	return w.Store.Claim(ctx, p)
}

// TestPendingAgainWakesOnlyFullClaims replays the window of a write that
// puts a job back to pending behind the claim position (a release, a
// failure with a retry due now, a retry by hand, a bulk retry): between
// its commit, its forcing the next claim to start at the head
// (claimFrom.ahead) and its waking the claimers
// (postgres/claimfrom.go, pendingAgain). A claimer woken before the next
// claim is forced to be full starts at the position, past the job, comes
// back empty and sleeps; the job then waits for a poll or the next
// periodic full claim, here a minute and an hour away. The stall holds
// ahead until a claim has begun (or half a second has passed): the job
// must still be worked at once, and no claim may begin inside the stall
// (only a wake-up starts one: polls are a minute apart). It fails when
// pendingAgain wakes the claimers first.
func TestPendingAgainWakesOnlyFullClaims(t *testing.T) {
	writes := map[string]func(ctx context.Context, s *postgres.Store, j *readpast.Job) error{
		"release": func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
			return s.Release(ctx, j.ID, j.Token)
		},
		"fail, retry due now": func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
			errs, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "again", RetryAt: time.Now().Add(-time.Second)}})
			if err == nil {
				err = errs[0]
			}
			return err
		},
		"retry by hand": func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
			if _, err := s.Cancel(ctx, j.ID); err != nil {
				return err
			}
			_, err := s.Retry(ctx, j.ID)
			return err
		},
		"bulk retry": func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
			if _, err := s.Cancel(ctx, j.ID); err != nil {
				return err
			}
			n, err := s.BulkRetry(ctx, readpast.JobFilter{Queue: "q", State: readpast.StateCancelled})
			if err == nil && n != 1 {
				err = fmt.Errorf("bulk retry retried %d jobs, want 1", n)
			}
			return err
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u, err := url.Parse(pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("readpast_listen", "off") // only this store's own wake-ups
			u.RawQuery = q.Encode()
			s := pgharness.Open(t, u.String())
			defer s.Close()
			postgres.SetClaimFullEvery(s, time.Hour)
			var armed atomic.Bool
			var wokeEarly atomic.Bool
			w := claimWatch{Store: s, began: make(chan struct{}, 1), inFlight: new(atomic.Int32)}
			postgres.OnAhead(s, func() {
				if !armed.CompareAndSwap(true, false) {
					return
				}
				select {
				case <-w.began:
					wokeEarly.Store(true)
				case <-time.After(500 * time.Millisecond):
				}
			})

			t0 := time.Now().Add(-time.Hour)
			var ps []readpast.EnqueueParams
			for i := range 3 {
				ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: t0.Add(time.Duration(i) * time.Second), MaxAttempts: 5})
			}
			ps[0].Priority = -1 // a retry, due now, still comes before the position
			jobs, err := s.Enqueue(ctx, ps)
			if err != nil {
				t.Fatal(err)
			}
			// The first job is taken by hand, the next two by the client,
			// whose position then lies a priority and two seconds (of
			// run_at) past it.
			first, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "by-hand", Limit: 1, Lease: time.Minute})
			if err != nil || len(first) != 1 || first[0].ID != jobs[0].ID {
				t.Fatalf("claimed %v, %v; want job %d", first, err, jobs[0].ID)
			}
			ran := make(chan int64, 10)
			workers := readpast.NewWorkers()
			workers.Handle("k", func(ctx context.Context, j *readpast.Job) (any, error) {
				ran <- j.ID
				return nil, nil
			}, nil)
			c, err := readpast.NewClient(w, readpast.Config{
				Workers:        workers,
				Queues:         map[string]readpast.QueueConfig{"q": {MaxWorkers: 1}},
				Lease:          time.Minute,
				PollInterval:   time.Minute,
				RescueInterval: -1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer c.Stop(ctx)
			for _, want := range []int64{jobs[1].ID, jobs[2].ID} {
				select {
				case id := <-ran:
					if id != want {
						t.Fatalf("ran job %d, want %d", id, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("job %d did not run", want)
				}
			}
			// Let the client come back empty and go to sleep: no claim
			// in flight, and none begun, for 200 ms.
			for quiet := false; !quiet; {
				select {
				case <-w.began:
				case <-time.After(200 * time.Millisecond):
					quiet = w.inFlight.Load() == 0
				}
			}

			armed.Store(true)
			if err := write(ctx, s, first[0]); err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-ran:
				if id != jobs[0].ID {
					t.Fatalf("ran job %d, want %d", id, jobs[0].ID)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("job %d, pending again behind the position, did not run within 5 s (a claim began before the next one was forced full: %v)", jobs[0].ID, wokeEarly.Load())
			}
			if armed.Load() {
				t.Fatal("the write never made the next claim a full one")
			}
			if wokeEarly.Load() {
				t.Fatal("a claimer was woken before the next claim was made a full one")
			}
		})
	}
}
