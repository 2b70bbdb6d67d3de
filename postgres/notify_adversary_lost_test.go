package postgres_test

// Adversarial tests of the wake-ups the store sends after a claim's,
// completion's or failure's commit (their statements send no NOTIFY): none
// may be lost while every process lives.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// advNotifyListen opens a connection of its own listening on readpast: a
// stand-in for another process's listener.
func advNotifyListen(t *testing.T, s *postgres.Store) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN readpast"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// advNotifyHeard returns the payloads conn receives until none comes for
// quiet.
func advNotifyHeard(conn *pgx.Conn, quiet time.Duration) []string {
	var out []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, n.Payload)
	}
}

func advNotifyHas(payloads []string, due bool) bool {
	for _, p := range payloads {
		if due && strings.HasPrefix(p, "due:") || !due && p == "" {
			return true
		}
	}
	return false
}

// TestAdvNotifyCloseSendsScheduledWakes: another process (a second store on the
// same database) completes the job holding a key's only slot, or claims
// a key's last token, and then closes, as a client does when it stops
// gracefully (its last completions, then Store.Close). Close sends the
// wake-ups still scheduled before it closes the pool; dropped, every other
// process's workers would wait for their poll for the freed slot's next
// job and for the key's next start.
func TestAdvNotifyCloseSendsScheduledWakes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
	advPut(t, s, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	l := advNotifyListen(t, s)
	const trials = 5
	lostFreed, lostDue := 0, 0
	for i := range trials {
		key := fmt.Sprintf("c:%d", i)
		advEnq(t, s, []string{key}, []string{key})
		other, err := postgres.Open(ctx, s.Pool().Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		got := mustClaim(t, other, "w", 10)
		if len(got) != 1 {
			t.Fatalf("claimed %d jobs of %s, want 1 (one slot)", len(got), key)
		}
		advNotifyHeard(l, 200*time.Millisecond)
		advComplete(t, other, got[0]) // frees the slot of the key's waiting job
		other.Close()
		if !advNotifyHas(advNotifyHeard(l, 500*time.Millisecond), false) {
			lostFreed++
		}

		// Out of the way: the freed slot's job, through s.
		advComplete(t, s, mustClaim(t, s, "w", 10)...)
		key = fmt.Sprintf("r:%d", i)
		advEnq(t, s, []string{key}, []string{key})
		advNotifyHeard(l, 200*time.Millisecond)
		other, err = postgres.Open(ctx, s.Pool().Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		got = mustClaim(t, other, "w", 10) // takes the key's token, leaves its next job out
		if len(got) != 1 {
			t.Fatalf("claimed %d jobs of %s, want 1 (one token)", len(got), key)
		}
		other.Close()
		if !advNotifyHas(advNotifyHeard(l, 500*time.Millisecond), true) {
			lostDue++
		}
	}
	if lostFreed > 0 {
		t.Errorf("%d of %d completions that freed a slot, their store then closed, woke no other process", lostFreed, trials)
	}
	if lostDue > 0 {
		t.Errorf("%d of %d claims that left a key out of tokens, their store then closed, announced no next start", lostDue, trials)
	}
}

// TestAdvNotifyLostClaimResponseStillAnnounces: a claim takes an unkeyed job and
// passes over key R, out of tokens, marking R's next job at R's next
// start. It commits, but its answer never reaches the store (the network
// holds it; the caller's context ends): the store settles the claim
// (gives the unkeyed job back) without the due row it never read, so it
// reads the upcoming times and announces them instead; otherwise R's next
// job would wait for a poll in every process, this one included.
func TestAdvNotifyLostClaimResponseStillAnnounces(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "R", Concurrency: 10, Rate: 1, Per: 30 * time.Second, Burst: 1}) // no token comes back however slow the machine
	advEnq(t, s, []string{"R"})
	if got := mustClaim(t, s, "w", 10); len(got) != 1 {
		t.Fatalf("claimed %d, want R's first job", len(got))
	}
	advEnq(t, s, []string{"R"}) // marked due now; R has no token until its next start
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "plain"}}); err != nil {
		t.Fatal(err)
	}
	l := advNotifyListen(t, s)
	advNotifyHeard(l, 200*time.Millisecond)

	// The claim commits: the plain job running, R marked at its next start.
	loseAnswer(t, s, "claim.end", "claim", func(ctx context.Context, victim *postgres.Store) error {
		_, err := victim.Claim(ctx, readpast.ClaimParams{Worker: "victim", Limit: 10, Lease: time.Hour})
		return err
	}, func() { waitRunning(t, s, 2) })

	var future int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM readpast_group_ready WHERE group_key = 'R' AND run_at > now()").Scan(&future); err != nil {
		t.Fatal(err)
	}
	got := advNotifyHeard(l, time.Second)
	t.Logf("R's marks at its next start: %d; heard after the claim: %q", future, got)
	if future == 0 {
		t.Fatal("set-up: the claim did not mark R at its next start")
	}
	if !advNotifyHas(got, true) {
		t.Errorf("the committed claim left R out of tokens and nobody announced R's next start (heard %q)", got)
	}
}

// loseAnswer runs call on a store of its own reaching s's database through
// a proxy, stopped at the stall point: once there, the proxy holds back
// every answer, the statement goes on and commits (committed waits for
// it to), and call's context ends. call must then fail (what of a call
// whose answer is lost); the proxy's connections are cut.
func loseAnswer(t *testing.T, s *postgres.Store, point, what string, call func(context.Context, *postgres.Store) error, committed func()) {
	t.Helper()
	proxy := proxyTo(t, s)
	st := newStallVia(t, s, point, proxy.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := async(func() error {
		if call(ctx, st.store) == nil {
			return fmt.Errorf("the %s succeeded although its answer was held back", what)
		}
		return nil
	})
	st.waitBlocked()
	proxy.HoldResponses()
	st.open()
	committed()
	cancel()
	within(t, "the cancelled "+what, 15*time.Second, done)
	proxy.CutAll()
}

// TestAdvNotifyLostCompleteResponseStillWakes: a completion frees the only
// slot of key K, commits, and its answer is lost (the caller's context
// ends): Store.Complete returns an error and never learns that it freed a
// slot, so it sends the wake-up on the error; a retry of the completion
// would find the job completed and free nothing.
func TestAdvNotifyLostCompleteResponseStillWakes(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "K", Concurrency: 1})
	advEnq(t, s, []string{"K"}, []string{"K"})
	run := mustClaim(t, s, "w", 10)
	if len(run) != 1 {
		t.Fatalf("claimed %d, want 1", len(run))
	}
	l := advNotifyListen(t, s)
	advNotifyHeard(l, 200*time.Millisecond)

	loseAnswer(t, s, "finish.group_rows", "completion", func(ctx context.Context, victim *postgres.Store) error {
		_, err := victim.Complete(ctx, []readpast.Completion{{ID: run[0].ID, Token: run[0].Token}})
		return err
	}, func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			j, err := s.Get(ctx, run[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == readpast.StateSucceeded {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s, want succeeded", j.State)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	got := advNotifyHeard(l, time.Second)
	if !advNotifyHas(got, false) {
		t.Errorf("a committed completion freed K's slot and nobody woke the other processes (heard %q)", got)
	}
}
