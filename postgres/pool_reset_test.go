package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// warmPool fills s's pool with n idle connections and returns how many
// connections it has opened so far.
func warmPool(t *testing.T, s *postgres.Store, n int) int64 {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.Pool().Exec(context.Background(), "SELECT pg_sleep(0.05)"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	return s.Pool().Stat().NewConnsCount()
}

// TestPoolKeptAfterCallsThatSayNothingOfIt: the store empties its pool
// after a call fails in a way that says its connections may be dead (a
// connection lost, a server silent for long), and only then. It used to
// empty it after a heartbeat refused because the job had just completed
// (pgx.ErrNoRows counted as "outcome unknown") and after any call its
// caller gave up on within a fraction of a second: under CI's load the
// pools of TestMultiProcessWorkers were emptied several times a second,
// every caller waited for a new connection to a cold server process,
// completions landed after their leases ran out and live workers' jobs ran
// twice. Here each such call must leave the idle connections in place, so
// the next call opens none.
func TestPoolKeptAfterCallsThatSayNothingOfIt(t *testing.T) {
	ctx := context.Background()
	s := pgharness.Open(t, pgtest.URL(t))
	jobs, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{readpast.DefaultQueue}, Worker: "w", Limit: 2, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(claimed), err)
	}
	done, held := claimed[0], claimed[1]
	if _, err := s.Complete(ctx, []readpast.Completion{{ID: done.ID, Token: done.Token}}); err != nil {
		t.Fatal(err)
	}

	// A heartbeat that lost the race to its job's completion.
	opened := warmPool(t, s, 3)
	if _, err := s.Extend(ctx, done.ID, done.Token, time.Minute); !errors.Is(err, readpast.ErrStaleToken) && !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("extend of a completed job: %v", err)
	}
	if _, err := s.Get(ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := s.Pool().Stat().NewConnsCount(); n != opened {
		t.Errorf("a refused extension emptied the pool: %d connections opened after it", n-opened)
	}

	// A heartbeat its caller gave up on after 100 ms, its job's row held
	// by another transaction. pgx closes the connection it ran on; the
	// others stay.
	opened = warmPool(t, s, 3)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM readpast_jobs WHERE id = $1 FOR UPDATE", held.ID); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.Extend(short, held.ID, held.Token, time.Minute)
	cancel()
	if !errors.Is(err, readpast.ErrUnavailable) {
		t.Fatalf("extend of a locked row with 100 ms to wait: %v", err)
	}
	if _, err := s.Get(ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := s.Pool().Stat().NewConnsCount(); n != opened {
		t.Errorf("an extension given up on after 100 ms emptied the pool: %d connections opened after it", n-opened)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Extend(ctx, held.ID, held.Token, time.Minute); err != nil {
		t.Errorf("extend once the row is free: %v", err)
	}
}
