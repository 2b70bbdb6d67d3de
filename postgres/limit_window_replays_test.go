package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// The windows of a key's limit, replayed with a claim stopped inside its
// statement (stall_test.go): between its snapshot and the lock of the
// key's row ("claim.group_rows"), and after it created a key's row, not
// yet committed ("claim.end"). Each test fails if the claim decided from
// its snapshot instead of the row it locked, or a limit change missed a
// row created meanwhile.

// putLimit declares l on s.
func putLimit(t *testing.T, s *postgres.Store, l readpast.Limit) {
	t.Helper()
	if _, err := s.PutLimit(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// keyJobs enqueues n jobs of key in queue q.
func keyJobs(t *testing.T, s *postgres.Store, key, q string, n int) {
	t.Helper()
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: q, Group: key}
	}
	if _, err := s.Enqueue(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
}

func claimQ(worker string, limit int, queues ...string) readpast.ClaimParams {
	return readpast.ClaimParams{Worker: worker, Queues: queues, Limit: limit, Lease: time.Minute}
}

// TestTwoClaimsReadOneKeysTokens: a claim whose snapshot shows a full
// bucket stops before it locks the key's row; another claim takes the
// whole burst (jobs the first claim's snapshot does not show) and
// commits; the first goes on. It must read the bucket from the row it
// locked, which is empty, and take nothing: reading the tokens from its
// snapshot would start 5 jobs with a burst of 3.
func TestTwoClaimsReadOneKeysTokens(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Hour, Burst: 3})
	if g, err := s.TakeTokens(ctx, "api", 1); err != nil || !g.Granted { // the key's row, with 2 tokens left
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	keyJobs(t, s, "api", "qa", 4)
	first := newStall(t, s, "claim.group_rows")
	var got1 []*readpast.Job
	done1 := async(func() error {
		var err error
		got1, err = first.store.Claim(ctx, claimQ("first", 10, "qa"))
		return err
	})
	first.waitBlocked() // its snapshot shows 2 tokens; it holds qa's mark of api
	// Two jobs ahead of the others, which the first claim's snapshot
	// does not show, with a mark of api that it does not hold.
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "k", Queue: "qb", Group: "api", Priority: -1}, {Kind: "k", Queue: "qb", Group: "api", Priority: -1}}); err != nil {
		t.Fatal(err)
	}
	got2 := claimWithin(t, "a second claim", time.Second, s, claimQ("second", 10, "qa", "qb"))
	if len(got2) != 2 || got2[0].Priority != -1 || got2[1].Priority != -1 {
		t.Fatalf("the second claim took %v, want the 2 new jobs ahead, with the 2 tokens left", got2)
	}
	first.open()
	within(t, "the first claim", 2*time.Second, done1)
	if len(got1) != 0 {
		t.Fatalf("the first claim took %d jobs from a bucket the second emptied: %d starts with a burst of 3", len(got1), 1+len(got2)+len(got1))
	}
	checkGroups(t, s)
}

// TestLimitLoweredWhileAClaimRuns: a claim stops between its snapshot and
// the key's row; the key's limit is lowered (concurrency 4 to 1, burst 4
// to 1) and commits; the claim goes on and must follow the new limit.
func TestLimitLoweredWhileAClaimRuns(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "api", Concurrency: 4, Rate: 1, Per: time.Hour, Burst: 4})
	if g, err := s.TakeTokens(ctx, "api", 1); err != nil || !g.Granted { // the key's row
		t.Fatalf("TakeTokens = %+v, %v", g, err)
	}
	keyJobs(t, s, "api", "qa", 4)
	claimer := newStall(t, s, "claim.group_rows")
	var got []*readpast.Job
	done := async(func() error {
		var err error
		got, err = claimer.store.Claim(ctx, claimQ("stalled", 10, "qa"))
		return err
	})
	claimer.waitBlocked()
	within(t, "PutLimit while a claim is stopped before the key's row", 2*time.Second, async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "api", Concurrency: 1, Rate: 1, Per: time.Hour, Burst: 2})
		return err
	}))
	claimer.open()
	within(t, "the claim", 2*time.Second, done)
	// Burst 2 with one token taken: 1 start; concurrency 1: 1 running.
	if len(got) != 1 {
		t.Fatalf("the claim took %d jobs after the limit went to concurrency 1, burst 2 (1 token left)", len(got))
	}
	checkGroups(t, s)
}

// TestTemplateChangedWhileAClaimCreatesItsRow: a claim stops before the
// row of a key that has none (its snapshot shows the template's old
// limit); the template changes and commits; the claim creates the row
// and must give it the new limit.
func TestTemplateChangedWhileAClaimCreatesItsRow(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	keyJobs(t, s, "c:1", "qa", 5)
	claimer := newStall(t, s, "claim.group_rows")
	var got []*readpast.Job
	done := async(func() error {
		var err error
		got, err = claimer.store.Claim(ctx, claimQ("stalled", 10, "qa"))
		return err
	})
	claimer.waitBlocked()
	within(t, "PutLimit of the template", 2*time.Second, async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 2})
		return err
	}))
	claimer.open()
	within(t, "the claim", 2*time.Second, done)
	if len(got) != 2 {
		t.Fatalf("the claim that created c:1's row took %d, want 2 (the template's new concurrency)", len(got))
	}
	checkGroups(t, s)
}

// TestLimitChangeWaitsForARowBeingCreated: a claim created a key's row
// with the template's limit and has not committed; PutLimit of the
// template must not miss that row. It waits for the claim (claims hold
// the limits' lock shared while they create rows), then applies to it.
// Claims meanwhile never wait: one that would create a row passes the
// key over.
func TestLimitChangeWaitsForARowBeingCreated(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
	keyJobs(t, s, "c:1", "qa", 3)
	claimer := newStall(t, s, "claim.end")
	var got []*readpast.Job
	done := async(func() error {
		var err error
		got, err = claimer.store.Claim(ctx, claimQ("stalled", 10, "qa"))
		return err
	})
	claimer.waitBlocked() // c:1's row created, limit 1, not committed
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 3})
		return err
	})
	select {
	case err := <-put:
		t.Fatalf("PutLimit returned (%v) while a claim had a row of its template uncommitted", err)
	case <-time.After(300 * time.Millisecond):
	}
	keyJobs(t, s, "c:2", "qb", 1) // a key whose row the next claim would create
	if more := claimWithin(t, "a claim while PutLimit waits", time.Second, s, claimQ("other", 10, "qb")); len(more) != 0 {
		t.Fatalf("a claim created c:2's row while its template was changing: took %d", len(more))
	}
	claimer.open()
	within(t, "the claim", 2*time.Second, done)
	within(t, "PutLimit", 2*time.Second, put)
	if len(got) != 1 {
		t.Fatalf("the stalled claim took %d, want 1 (the old limit)", len(got))
	}
	info, err := s.GetLimit(ctx, "c:*")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Keys) != 1 || info.Keys[0].Key != "c:1" || info.Keys[0].Concurrency != 3 {
		t.Fatalf("keys of c:* after PutLimit: %+v, want c:1 with concurrency 3", info.Keys)
	}
	if more := claimWithin(t, "a claim after", time.Second, s, claimQ("after", 10, "qa", "qb")); len(more) != 3 {
		t.Fatalf("after PutLimit claimed %d, want c:1's 2 others and c:2's", len(more))
	}
	checkGroups(t, s)
}

// TestRescueRacingALateCompletionOfALimitedKey: the attempt of a key whose
// limit is one at a time outlives its lease, and its completion comes late,
// racing the rescue of the same attempt. Whichever wins, the key's slot is
// freed once and its token spent once:
//   - rescue first: the completion stops before it locks the job's row
//     (its snapshot shows the job running under its token); the rescue
//     ends the attempt and frees the slot; the completion goes on, finds
//     the job pending, and is refused as stale, freeing nothing;
//   - completion first: the completion stops after it took the job's row,
//     before the key's row (finish.group_rows); the rescue passes the held
//     row over; the completion goes on and frees the slot.
//
// After either, the key's counter matches its running jobs, a claim takes
// exactly one more of its jobs, and the key's bucket counts every start
// (a freed slot never gives a token back).
func TestRescueRacingALateCompletionOfALimitedKey(t *testing.T) {
	for _, c := range []struct {
		place       string
		rescued     int               // what the rescue ends while the completion is stopped
		stale       bool              // the completion refused
		state       readpast.JobState // the raced job's state at the end
		tokensAfter int               // the key's tokens once the next job is claimed
	}{
		{"complete.before_locks", 1, true, readpast.StateRunning, 1},
		{"finish.group_rows", 0, false, readpast.StateSucceeded, 1},
	} {
		t.Run(c.place, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			defer s.Close()
			putLimit(t, s, readpast.Limit{Key: "rk", Concurrency: 1, Rate: 1, Per: time.Hour, Burst: 3})
			keyJobs(t, s, "rk", "qr", 2)
			p := claimQ("w1", 10, "qr")
			p.Lease = 50 * time.Millisecond
			first, err := s.Claim(ctx, p)
			if err != nil || len(first) != 1 {
				t.Fatalf("the first claim took %d jobs (%v), want 1 (concurrency 1)", len(first), err)
			}
			finisher := newStall(t, s, c.place)
			var errs []error
			done := async(func() error {
				var err error
				errs, err = finisher.store.Complete(ctx, []readpast.Completion{{ID: first[0].ID, Token: first[0].Token}})
				return err
			})
			finisher.waitBlocked()
			time.Sleep(150 * time.Millisecond) // the lease runs out
			// Rescue until the attempt is ended, or for 200 ms when the
			// completion holds its row.
			var rescued int
			wait := 200 * time.Millisecond
			if c.rescued > 0 {
				wait = 2 * time.Second
			}
			for deadline := time.Now().Add(wait); rescued < c.rescued || c.rescued == 0; {
				n, err := s.RescueExpired(ctx, 100)
				if err != nil {
					t.Fatal(err)
				}
				rescued += n
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if rescued != c.rescued {
				t.Fatalf("the rescue ended %d attempts while the completion was stopped at %s, want %d", rescued, c.place, c.rescued)
			}
			finisher.open()
			within(t, "the late completion", 5*time.Second, done)
			if stale := len(errs) == 1 && errors.Is(errs[0], readpast.ErrStaleToken); stale != c.stale {
				t.Fatalf("the late completion returned %v; want stale: %v", errs, c.stale)
			}
			checkGroups(t, s)

			p.Lease = time.Minute
			next, err := s.Claim(ctx, p)
			if err != nil || len(next) != 1 {
				t.Fatalf("the next claim took %d jobs (%v), want 1: the key's one slot is free once", len(next), err)
			}
			if more, err := s.Claim(ctx, p); err != nil || len(more) != 0 {
				t.Fatalf("a claim with the key's slot taken took %d jobs (%v), want 0", len(more), err)
			}
			checkGroups(t, s)
			if j, err := s.Get(ctx, first[0].ID); err != nil || j.State != c.state {
				t.Fatalf("the raced job: %+v, %v; want %s", j, err, c.state)
			}
			info, err := s.GetLimit(ctx, "rk")
			if err != nil || len(info.Keys) != 1 {
				t.Fatalf("GetLimit(rk) = %+v, %v", info, err)
			}
			if got := info.Keys[0].Tokens; got != c.tokensAfter {
				t.Fatalf("the key has %d tokens after two starts with a burst of 3 an hour, want %d: a freed slot gives no token back", got, c.tokensAfter)
			}
		})
	}
}

// TestWeightChangeReachesARowBeingCreated: a change of a template's weight
// alone, while a claim has created a key's row with the old weight and
// not committed, must reach that row: the change waits for the claim and
// then applies itself, the weight counting as a change of the limit.
func TestWeightChangeReachesARowBeingCreated(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "c:*", Concurrency: 5})
	keyJobs(t, s, "c:1", "qa", 3)
	claimer := newStall(t, s, "claim.end")
	done := async(func() error {
		_, err := claimer.store.Claim(ctx, claimQ("stalled", 1, "qa"))
		return err
	})
	claimer.waitBlocked() // c:1's row created with weight 1, not committed
	put := async(func() error {
		_, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 5, Weight: 4})
		return err
	})
	time.Sleep(100 * time.Millisecond)
	claimer.open()
	within(t, "the claim", 2*time.Second, done)
	within(t, "PutLimit", 2*time.Second, put)
	var weight int
	if err := s.Pool().QueryRow(ctx, `SELECT weight FROM readpast_groups WHERE group_key = 'c:1'`).Scan(&weight); err != nil {
		t.Fatal(err)
	}
	if weight != 4 {
		t.Fatalf("c:1's row has weight %d after the template's weight went to 4, want 4", weight)
	}
	checkGroups(t, s)
}

// TestRoundsSkipAHeldHead: a key's first job is held by another
// transaction (a caller's open transaction locked its row) when a claim
// reads the key. The claim cannot take that job, so it must not count it
// in the key's rounds: the key's next job is in the first round, and,
// due before four ungrouped jobs, is taken. Counted from the held job it
// would be in the second round, behind all four, and the key would take
// nothing for as long as the row is held.
func TestRoundsSkipAHeldHead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	putLimit(t, s, readpast.Limit{Key: "t:*", Concurrency: 10})
	keyJobs(t, s, "t:k", "qa", 3)
	time.Sleep(2 * time.Millisecond)
	for range 4 {
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "u", Queue: "qa"}}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var held int64
	if err := tx.QueryRow(ctx, `SELECT id FROM readpast_jobs WHERE group_key = 't:k' ORDER BY id LIMIT 1 FOR UPDATE`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	got := claimWithin(t, "a claim of 4", 2*time.Second, s, claimQ("w", 4, "qa"))
	keyed := 0
	for _, j := range got {
		if j.ID == held {
			t.Fatalf("the claim took job %d, which another transaction holds", held)
		}
		if j.Group != nil {
			keyed++
		}
	}
	if keyed != 1 || len(got) != 4 {
		t.Fatalf("a claim of 4 took %d jobs, %d of t:k; want 4, one of t:k (its first free job, due before the ungrouped ones)", len(got), keyed)
	}
}
