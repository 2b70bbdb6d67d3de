package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// Adversarial replays of "a slot freed on a key that was full and is out
// of tokens announces the key's next start" (0023_full_key_next_start.sql,
// and claim.sql's due listing the next starts of keys a claim filled).

// arvOpenParams opens and migrates a store on a fresh database with the
// given URL parameters.
func arvOpenParams(t *testing.T, params string) *postgres.Store {
	t.Helper()
	u, err := pgtest.WithParams(pgtest.URL(t), params)
	if err != nil {
		t.Fatal(err)
	}
	s := pgharness.Open(t, u)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAdvWakeListenOffFullKeyNextStart: a store with readpast_listen=off
// (the documented setting behind a transaction-mode pooler: "local
// wake-ups only") is the only process. A claim fills key g (concurrency
// 1, one start a 500 ms) and leaves it out of tokens; the completion
// before g's next start marks g's next job at that start. The trigger's
// NOTIFY does not reach this store (it has no LISTEN session); the
// claim's own due row lists the next start, and announceDue sets a local
// alarm whether or not the store listens. Its own claimers must be woken
// at the next start.
func TestAdvWakeListenOffFullKeyNextStart(t *testing.T) {
	for _, how := range []string{"Complete", "CompleteTx"} {
		replay.Run(t, how, func(t *testing.T) {
			ctx := context.Background()
			s := arvOpenParams(t, "readpast_listen=off")
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			putLimit(t, s, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 500 * time.Millisecond, Burst: 1})
			js := aw2pgEnqueue(t, s, readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"}, readpast.EnqueueParams{Kind: "b", Queue: "q", Group: "g"})
			got := aw2pgClaim(t, s, "q", 10)
			if len(got) != 1 || got[0].ID != js[0].ID {
				t.Fatalf("first claim: %d jobs, want a", len(got))
			}
			next := replay.NextStart(t, s, "g", "g")
			time.Sleep(20 * time.Millisecond)
			replay.Drain(ch)
			switch how {
			case "Complete":
				advComplete(t, s, got[0])
			case "CompleteTx":
				tx, err := s.Pool().Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
					tx.Rollback(ctx)
					t.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if !time.Now().Before(next) {
				t.Skip("the completion came after the next start: no window")
			}
			replay.Delivered(t, s, ch, "q", js[1].ID, next, "readpast_listen=off: the next job of a full key a claim left out of tokens, after "+how)
		})
	}
}

// TestAdvWakeCompleteTxCommittedAfterNextStart: CompleteTx in a caller's
// transaction held open past the key's next start; the NOTIFY is delivered
// at the commit with a past time, whose alarm comes at once (control: a
// listening store).
func TestAdvWakeCompleteTxCommittedAfterNextStart(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		ctx := context.Background()
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 300 * time.Millisecond, Burst: 1})
		js := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"}, readpast.EnqueueParams{Kind: "b", Queue: "q", Group: "g"})
		got := aw2pgClaim(t, a, "q", 10)
		if len(got) != 1 || got[0].ID != js[0].ID {
			t.Fatalf("first claim: %d jobs, want a", len(got))
		}
		next := replay.NextStart(t, a, "g", "g")
		tx, err := a.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.CompleteTx(ctx, tx, readpast.Completion{ID: got[0].ID, Token: got[0].Token}); err != nil {
			tx.Rollback(ctx)
			t.Fatal(err)
		}
		time.Sleep(time.Until(next) + 100*time.Millisecond)
		// The worker woke meanwhile (if at all) and found nothing.
		for len(ch) > 0 {
			<-ch
			if js2 := aw2pgClaim(t, w, "q", 10); len(js2) != 0 {
				t.Fatalf("claimed %d jobs before the commit", len(js2))
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		replay.Delivered(t, w, ch, "q", js[1].ID, time.Now(), "a full key's next job freed by a CompleteTx committed after the next start")
	})
}

// TestAdvWakeTriggerDueCap: one Complete frees slots of 257 full keys
// out of tokens, whose next starts are 257 distinct times, the 257th well
// past the 256th's alarms (dueSkew included). The claims that filled the
// keys announce their next starts, and the completion's trigger lists
// them again, in NOTIFYs of 256 times each: the 257th key's next job
// must be announced too.
func TestAdvWakeTriggerDueCap(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		ctx := context.Background()
		const n = 257
		per := 4 * time.Second
		putLimit(t, a, readpast.Limit{Key: "r:*", Concurrency: 1, Rate: 1, Per: per, Burst: 1})
		var ps []readpast.EnqueueParams
		for k := range n {
			ps = append(ps, readpast.EnqueueParams{Kind: "first", Queue: "q", Keys: []string{fmt.Sprint("r:", k)}})
		}
		firsts := aw2pgEnqueue(t, a, ps...)
		for k := range n {
			ps[k].Kind = "second"
		}
		seconds := aw2pgEnqueue(t, a, ps...)
		began := time.Now()
		byKey := map[string]*readpast.Job{}
		for i := range n {
			if i == n-1 {
				time.Sleep(600 * time.Millisecond) // the last key's next start well after the others'
			}
			got := aw2pgClaim(t, a, "q", 1)
			if len(got) != 1 {
				t.Fatalf("claim %d: %d jobs", i, len(got))
			}
			byKey[*got[0].Group] = got[0]
		}
		if len(byKey) != n {
			t.Fatalf("claims took %d keys, want %d", len(byKey), n)
		}
		if time.Since(began) > per/2 {
			t.Skip("claims too slow: no window")
		}
		_ = firsts
		// The job whose key was filled last.
		var last *readpast.Job
		for _, j := range byKey {
			if last == nil || j.StartedAt.After(*last.StartedAt) {
				last = j
			}
		}
		var want *readpast.Job
		for _, j := range seconds {
			if j.Group != nil && *j.Group == *last.Group {
				want = j
			}
		}
		next := last.StartedAt.Add(per) // burst 1: one start a per
		time.Sleep(20 * time.Millisecond)
		replay.Drain(ch)
		var cs []readpast.Completion
		for _, j := range byKey {
			cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
		}
		res, err := a.Complete(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res {
			if e != nil {
				t.Fatal(e)
			}
		}
		if !time.Now().Before(next) {
			t.Skip("no window")
		}
		replay.Delivered(t, w, ch, "q", want.ID, next, "the next job of the 257th full key freed by one Complete")
	})
}
