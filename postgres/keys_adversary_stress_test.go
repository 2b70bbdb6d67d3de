package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// advCheckCounters fails on a key whose counter differs from its running
// jobs, and on one above its limit unless exempt.
func advCheckCounters(t *testing.T, s *postgres.Store, exempt map[string]bool) {
	t.Helper()
	states, err := pgharness.GroupStates(context.Background(), s)
	if err != nil {
		t.Error(err)
		return
	}
	for _, g := range states {
		n := len(g.Started)
		if !g.Row && n > 0 {
			t.Errorf("key %s: %d running and no row", g.Group, n)
		} else if g.Counter != n {
			t.Errorf("key %s: counter %d, %d running", g.Group, g.Counter, n)
		} else if n > g.Limit && !exempt[g.Group] {
			t.Errorf("key %s: %d running, limit %d", g.Group, n, g.Limit)
		}
	}
}

func TestAdvKeysStress(t *testing.T) {
	for _, toggle := range []bool{false, true} {
		name := "steady"
		if toggle {
			name = "limits changing"
		}
		t.Run(name, func(t *testing.T) { advStress(t, toggle) })
	}
}

func advStress(t *testing.T, toggle bool) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	const k2Interval = 100 * time.Millisecond
	advPut(t, s, readpast.Limit{Key: "K1", Concurrency: 2})
	advPut(t, s, readpast.Limit{Key: "K2", Concurrency: 3, Rate: 10, Per: time.Second, Burst: 2})
	advPut(t, s, readpast.Limit{Key: "K3", Concurrency: 3})
	advPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 2})
	all := []string{"K1", "K2", "K3", "c:0", "c:1", "c:2", "c:3", "c:4", "c:5"}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var ps []readpast.EnqueueParams
	for i := 0; i < 400; i++ {
		perm := rng.Perm(len(all))
		n := 1 + rng.Intn(4)
		var keys []string
		for _, p := range perm[:n] {
			keys = append(keys, all[p])
		}
		if rng.Intn(10) == 0 {
			keys = nil
		}
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Keys: keys, Queue: []string{"qa", "qb"}[rng.Intn(2)], MaxAttempts: 3})
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	exempt := map[string]bool{}
	if toggle {
		exempt["K3"] = true
	}
	var mu sync.Mutex
	var k2Starts []time.Time
	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w) + time.Now().UnixNano()))
			for time.Now().Before(deadline) {
				jobs, err := s.Claim(ctx, readpast.ClaimParams{Queues: [][]string{{"qa", "qb"}, {"qa"}, {"qb"}}[r.Intn(3)],
					Worker: fmt.Sprint("w", w), Limit: 1 + r.Intn(4), Lease: 300 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				for _, j := range jobs {
					if slices.Contains(j.Keys, "K2") {
						mu.Lock()
						k2Starts = append(k2Starts, *j.StartedAt)
						mu.Unlock()
					}
				}
				if len(jobs) == 0 {
					time.Sleep(5 * time.Millisecond)
				}
				for _, j := range jobs {
					time.Sleep(time.Duration(r.Intn(10)) * time.Millisecond)
					var err error
					switch a := r.Intn(100); {
					case a < 40:
						_, err = s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
					case a < 55:
						_, err = s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x"}})
					case a < 62:
						_, err = s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x", Discard: true}})
					case a < 72:
						err = s.Release(ctx, j.ID, j.Token)
					case a < 80:
						err = s.Snooze(ctx, j.ID, j.Token, 30*time.Millisecond)
					case a < 85:
						_, err = s.Cancel(ctx, j.ID)
					case a < 90:
						// a late completion after the lease: stale or not
						go func(j *readpast.Job) {
							time.Sleep(400 * time.Millisecond)
							s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
						}(j)
					default:
						// abandoned: the lease expires
					}
					if err != nil && !isGone(err) {
						t.Errorf("action on %d: %v", j.ID, err)
					}
				}
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			if _, err := s.RescueExpired(ctx, 100); err != nil {
				t.Error(err)
			}
			if _, err := s.PruneGroups(ctx, 100); err != nil {
				t.Error(err)
			}
			advCheckCounters(t, s, exempt)
			if toggle {
				if _, err := s.PutLimit(ctx, readpast.Limit{Key: "K3", Concurrency: 1 + rand.Intn(3)}); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	time.Sleep(time.Until(deadline))
	close(stop)
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	advCheckCounters(t, s, exempt)
	if toggle {
		advPut(t, s, readpast.Limit{Key: "K3", Concurrency: 3})
	}
	// rate of K2 by the starts claims returned
	slices.SortFunc(k2Starts, func(a, b time.Time) int { return a.Compare(b) })
rate:
	for i := range k2Starts {
		for j := i; j < len(k2Starts); j++ {
			span := k2Starts[j].Sub(k2Starts[i])
			if allowed := 2 + int(span/k2Interval); j-i+1 > allowed {
				t.Errorf("K2 started %d jobs within %v (%v..%v), allowed %d", j-i+1, span, k2Starts[i], k2Starts[j], allowed)
				break rate
			}
		}
	}
	// drain: everything left must be claimable
	idle := time.Now()
	for time.Since(idle) < 3*time.Second {
		s.RescueExpired(ctx, 100)
		jobs, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"qa", "qb"}, Worker: "drain", Limit: 50, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) > 0 {
			idle = time.Now()
		}
		for _, j := range jobs {
			if _, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	advCheckCounters(t, s, nil)
	rows, err := s.Pool().Query(ctx, `SELECT id, state, group_key, more_keys, run_at <= now() FROM readpast_jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var state string
		var g *string
		var more []string
		var due bool
		if err := rows.Scan(&id, &state, &g, &more, &due); err != nil {
			t.Fatal(err)
		}
		gs := "<none>"
		if g != nil {
			gs = *g
		}
		t.Errorf("job %d left %s (due %v) keys %s %v after the drain: stranded", id, state, due, gs, more)
	}
	if t.Failed() {
		r2, _ := s.Pool().Query(ctx, `SELECT group_key, running, max_running, coalesce(waiters, '{}') FROM readpast_groups ORDER BY 1`)
		for r2.Next() {
			var k string
			var run, max int
			var w []string
			r2.Scan(&k, &run, &max, &w)
			t.Logf("row %s running %d max %d waiters %v", k, run, max, w)
		}
		r2.Close()
		r3, _ := s.Pool().Query(ctx, `SELECT group_key, queue, run_at FROM readpast_group_ready ORDER BY 1`)
		for r3.Next() {
			var k, q string
			var at time.Time
			r3.Scan(&k, &q, &at)
			t.Logf("mark %s %s %v", k, q, at)
		}
		r3.Close()
	}
}

func isGone(err error) bool {
	return errors.Is(err, readpast.ErrStaleToken) || errors.Is(err, readpast.ErrNotFound)
}
