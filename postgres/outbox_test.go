package postgres

// Tests of outbox (outbox.go) and its use by Store.Close.
// None of these tests needs a database: the pool points at a blackhole
// (notify_close_internal_test.go) and is only dialled where said.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readpast/readpast"
)

func outboxStore(t *testing.T, own bool) *Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://u:p@%s/db?sslmode=disable&pool_max_conns=4", blackhole(t)))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !own {
		t.Cleanup(pool.Close)
	}
	s := New(pool)
	s.ownPool = own
	return s
}

// TestOutboxWakeBetweenFlushAndClose: a Complete that entered before
// Close began commits and calls wakeOthers between Close's notify.flush
// and its out.close (held there by dueOut.mu, which Close's dueOut.flush
// takes in between). Close counts as busy and is closing from before its
// flushes, so the call's wake-up is handed over at once and runs; left to
// the trailing timer, it would fire after close and be refused.
func TestOutboxWakeBetweenFlushAndClose(t *testing.T) {
	for _, stayIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("callStillInWhenCloseWaits=%v", stayIn), func(t *testing.T) {
			s := outboxStore(t, false)
			var ran atomic.Int32
			s.notify.send = func(bool) { s.out.run(func() { ran.Add(1) }) }
			s.notify.every = 100 * time.Millisecond // the real 5 ms only makes the window shorter

			leave := s.out.enter() // the Complete, entered before Close
			s.dueOut.mu.Lock()     // Close stops between notify.flush and out.close
			closed := make(chan struct{})
			go func() { s.Close(); close(closed) }()
			time.Sleep(50 * time.Millisecond) // Close flushed the notifier (nothing pending)

			s.notify.mu.Lock()
			s.notify.last = time.Now() // a NOTIFY went out just now: the trailing one is due in `every`
			s.notify.mu.Unlock()
			s.wakeOthers() // the Complete's commit: closingNow() is still false
			if !stayIn {
				leave()
			}
			s.dueOut.mu.Unlock()
			if stayIn {
				time.Sleep(20 * time.Millisecond) // Close now waits in out.close for the call
				leave()
			}
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return")
			}
			time.Sleep(200 * time.Millisecond) // the trailing timer fired
			if ran.Load() == 0 {
				t.Errorf("a Complete that entered before Close began committed during Close and its wake-up was never sent (refused by outbox.run after Close)")
			}
		})
	}
}

// TestOutboxSendEndsBeforeCloseReturns: Close gives up on a send stuck on
// the network, cancels closeCtx, and waits for the cancelled send to end
// before it returns (a store on a caller's pool must not use it after
// Close).
func TestOutboxSendEndsBeforeCloseReturns(t *testing.T) {
	stillRunning := 0
	const rounds = 3
	for range rounds {
		s := outboxStore(t, false)
		var ended atomic.Bool
		s.out.run(func() { s.sendNotify(false); ended.Store(true) }) // dials the blackhole, hangs in start-up
		began := time.Now()
		s.Close()
		took := time.Since(began)
		if !ended.Load() {
			stillRunning++
		}
		t.Logf("Close took %v; send ended before Close returned: %v", took.Round(time.Millisecond), ended.Load())
		deadline := time.Now().Add(2 * time.Second)
		for !ended.Load() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !ended.Load() {
			t.Errorf("the cancelled send did not end within 2 s of Close")
		}
	}
	if stillRunning > 0 {
		t.Errorf("in %d of %d rounds a send was still running when Close returned", stillRunning, rounds)
	}
}

// TestOutboxCloseBoundWithStuckCall: a call that never leaves (a claim
// stuck on a dead network with a long context) holds busy: Close waits
// closeSendWait and no more, on a caller's pool (New) and on its own pool
// (Open: pgxpool.Close then waits for what the claim acquired, which is
// not the outbox's doing).
func TestOutboxCloseBoundWithStuckCall(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownPool=%v", own), func(t *testing.T) {
			s := outboxStore(t, own)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			p, err := readpast.ClaimParams{Worker: "w", Limit: 1, Lease: time.Minute}.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			claimed := make(chan struct{})
			go func() { _, _ = s.claim(ctx, p); close(claimed) }() // stuck in Acquire (start-up never answered)
			time.Sleep(100 * time.Millisecond)
			s.out.mu.Lock()
			busy := s.out.busy
			s.out.mu.Unlock()
			if busy != 1 {
				t.Fatalf("busy = %d with one claim in flight, want 1", busy)
			}
			began := time.Now()
			s.Close()
			took := time.Since(began)
			t.Logf("Close with a stuck claim in flight took %v", took.Round(time.Millisecond))
			if took > closeSendWait+500*time.Millisecond {
				t.Errorf("Close took %v, want about closeSendWait (%v)", took, closeSendWait)
			}
			cancel()
			<-claimed
			s.out.mu.Lock()
			busy = s.out.busy
			s.out.mu.Unlock()
			if busy != 0 {
				t.Errorf("busy = %d after the claim returned, want 0", busy)
			}
		})
	}
}

// TestOutboxStress: enter/leave, run (from entered and non-entered callers),
// closingNow, several concurrent close calls, calls entering while close
// runs. Invariants: no panic or race, close returns within its wait,
// busy returns to exactly 0, idle is not left open with busy 0, no send
// starts after a close that found everything ended returned, and every
// send an entered call handed over before leaving (while no close gave
// up) ran.
func TestOutboxStress(t *testing.T) {
	before := runtime.NumGoroutine()
	for round := range 60 {
		var o outbox
		var (
			handed, ran atomic.Int64
			afterClose  atomic.Int64
			closedDone  atomic.Bool // a close returned true
			gaveUp      atomic.Bool
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					leave := o.enter()
					for range rand.IntN(3) {
						o.run(func() {
							if closedDone.Load() {
								afterClose.Add(1)
							}
							ran.Add(1)
							time.Sleep(time.Duration(rand.IntN(50)) * time.Microsecond)
						})
						handed.Add(1)
					}
					_ = o.closingNow()
					if g%3 == 0 {
						time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
					}
					leave()
					runtime.Gosched()
				}
			})
		}
		time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
		var cw sync.WaitGroup
		for range 3 {
			cw.Go(func() {
				began := time.Now()
				ok := o.close(50 * time.Millisecond)
				if ok {
					closedDone.Store(true)
				} else {
					gaveUp.Store(true)
				}
				// The machine is loaded (2 cores, CI running): only a
				// wait far past close's own 50 ms counts.
				if d := time.Since(began); d > 10*time.Second {
					t.Errorf("round %d: close took %v", round, d)
				} else if d > time.Second {
					t.Logf("round %d: close took %v (loaded machine)", round, d)
				}
			})
		}
		cw.Wait()
		close(stop)
		wg.Wait()
		o.close(time.Second) // a last one, once everything stopped
		deadline := time.Now().Add(2 * time.Second)
		for {
			o.mu.Lock()
			busy, idle := o.busy, o.idle
			o.mu.Unlock()
			if busy == 0 {
				if idle != nil {
					t.Fatalf("round %d: busy 0 but idle still open", round)
				}
				break
			}
			if busy < 0 || time.Now().After(deadline) {
				t.Fatalf("round %d: busy = %d after everything stopped", round, busy)
			}
			time.Sleep(time.Millisecond)
		}
		if n := afterClose.Load(); n > 0 && !gaveUp.Load() {
			t.Errorf("round %d: %d sends started after a close that found everything ended had returned", round, n)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("goroutines: %d before, %d after", before, n)
	}
}

// TestOutboxEnteredSendsRun: every send handed over by a call that
// entered before close began runs,
// while close has not given up: calls enter, then close begins, then
// each call hands over sends (some after others left), then leaves.
func TestOutboxEnteredSendsRun(t *testing.T) {
	for round := range 500 {
		var o outbox
		const calls = 6
		leaves := make([]func(), calls)
		for i := range leaves {
			leaves[i] = o.enter()
		}
		closed := make(chan bool)
		go func() { closed <- o.close(5 * time.Second) }()
		for !o.closingNow() {
			runtime.Gosched()
		}
		var ran, refused atomic.Int64
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				for range 1 + rand.IntN(3) {
					c := make(chan struct{})
					o.run(func() { ran.Add(1); close(c) })
					select {
					case <-c:
					case <-time.After(time.Second):
						refused.Add(1)
					}
				}
				leaves[i]()
			})
		}
		wg.Wait()
		if !<-closed {
			t.Fatalf("round %d: close gave up", round)
		}
		if refused.Load() > 0 {
			t.Fatalf("round %d: %d sends of entered calls refused", round, refused.Load())
		}
	}
}
