package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
)

// TestAdvNotifyClaimRowsEveryMode: under every exec mode the store
// supports (and with a session default of REPEATABLE READ, which moves
// claims into claimReadCommitted), claims of keys left out of tokens never
// return the due row as a job, never return more than Limit jobs, and the
// next start is announced to other processes, also from a store with
// readpast_listen=off; such a store's own claimers wake at the next start.
func TestAdvNotifyClaimRowsEveryMode(t *testing.T) {
	ctx := context.Background()
	for _, params := range []string{
		"",
		"&default_query_exec_mode=cache_statement",
		"&default_query_exec_mode=exec&readpast_listen=off",
		"&default_query_exec_mode=simple_protocol",
		"&default_query_exec_mode=cache_describe",
		"&default_query_exec_mode=describe_exec",
		"&default_query_exec_mode=simple_protocol&default_transaction_isolation=repeatable%20read",
		"&default_transaction_isolation=serializable&readpast_listen=off",
	} {
		t.Run(params, func(t *testing.T) {
			base := pgtest.URL(t)
			u, err := pgtest.WithParams(base, params)
			if err != nil {
				t.Fatal(err)
			}
			s, err := postgres.Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			advPut(t, s, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: 1500 * time.Millisecond, Burst: 1})
			var ps []readpast.EnqueueParams
			for k := range 5 {
				for range 3 {
					ps = append(ps, readpast.EnqueueParams{Kind: "keyed", Keys: []string{fmt.Sprint("r:", k)}})
				}
			}
			for range 3 {
				ps = append(ps, readpast.EnqueueParams{Kind: "plain"})
			}
			if _, err := s.Enqueue(ctx, ps); err != nil {
				t.Fatal(err)
			}
			l := advNotifyListenURL(t, base)
			advNotifyHeard(l, 100*time.Millisecond)
			sub, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int64]bool{}
			began := time.Now()
			for range 10 {
				jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 2, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) > 2 {
					t.Errorf("claim of 2 returned %d jobs", len(jobs))
				}
				for _, j := range jobs {
					if j.ID == 0 || j.Kind == "" || j.StartedAt == nil || seen[j.ID] {
						t.Errorf("bad job returned: %+v", j)
					}
					seen[j.ID] = true
				}
			}
			ended := time.Now()
			if len(seen) != 8 {
				t.Errorf("claimed %d jobs, want 8 (one of each key, three plain)", len(seen))
			}
			if got := advNotifyHeard(l, 300*time.Millisecond); !advNotifyHas(got, true) {
				t.Errorf("no due: announcement heard: %q", got)
			}
			// Own claimers: woken at the keys' next start.
			for len(sub) > 0 {
				<-sub
			}
			deadline := began.Add(1500*time.Millisecond + time.Second)
			var woke time.Duration
		wait:
			for {
				select {
				case <-sub:
					woke = time.Since(began)
					if woke >= 1400*time.Millisecond {
						break wait
					}
				case <-time.After(time.Until(deadline)):
					break wait
				}
			}
			if woke < 1400*time.Millisecond {
				t.Errorf("own claimers not woken at the next start (last wake %v after the claims)", woke)
			}
			time.Sleep(time.Until(ended.Add(1700 * time.Millisecond)))
			jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 5 {
				t.Errorf("at the next start claimed %d, want one of each of 5 keys", len(jobs))
			}
		})
	}
}

func advNotifyListenURL(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN readpast"); err != nil {
		t.Fatal(err)
	}
	return conn
}
