package postgres

// Tests of the wake-ups a store sends after its statements commit
// (notifier, dueAnnouncer, outbox) and of Store.Close: lock order, how
// long Close waits for them, goroutines left behind.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
)

// TestNotifierOutboxStress hammers notifier.trail/due/flush,
// dueAnnouncer.add/flush and outbox.run/close from many goroutines (run
// with -race). It fails on a deadlock (a watchdog), on a trailing NOTIFY
// still pending after the callers stopped, and on flush and close not
// returning.
func TestNotifierOutboxStress(t *testing.T) {
	for round := range 50 {
		var (
			out   outbox
			clk   atomic.Int64 // logical clock
			lastS atomic.Int64 // clock value at the start of the latest send
			sends atomic.Int64
		)
		n := &notifier{every: time.Millisecond}
		n.send = func(bool) {
			out.run(func() {
				lastS.Store(clk.Add(1))
				sends.Add(1)
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			})
		}
		var d dueAnnouncer
		d.send = func(string) { out.run(func() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) }) }

		var wg sync.WaitGroup
		var lastTrail atomic.Int64
		stop := make(chan struct{})
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					switch (g + i) % 5 {
					case 0, 1:
						n.trail(g%2 == 0)
						v := clk.Add(1)
						for {
							old := lastTrail.Load()
							if v <= old || lastTrail.CompareAndSwap(old, v) {
								break
							}
						}
					case 2:
						n.due()
					case 3:
						d.add(time.Now().Add(time.Duration(rand.IntN(1000)) * time.Millisecond))
					case 4:
						if rand.IntN(20) == 0 {
							n.flush()
							d.flush()
						}
					}
				}
			})
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); done <- struct{}{} }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("round %d: deadlock\n%s", round, buf[:runtime.Stack(buf, true)])
		}
		// Quiescent: the last trail's NOTIFY must be sent (its timer fires
		// within every).
		deadline := time.Now().Add(2 * time.Second)
		for {
			n.mu.Lock()
			pending := n.pending
			n.mu.Unlock()
			if !pending {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: notifier still pending 2 s after quiescence", round)
			}
			time.Sleep(time.Millisecond)
		}
		out.close(time.Minute) // every send begun has recorded its clock
		if lastS.Load() < lastTrail.Load() {
			// Possibly a send that began between trail's return and the
			// caller's clock read: not proof of a loss, just logged.
			t.Logf("round %d: last send clock %d < last trail clock %d", round, lastS.Load(), lastTrail.Load())
		}
		closed := make(chan struct{})
		go func() { n.flush(); d.flush(); out.close(time.Minute); out.close(time.Minute); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: flush/close deadlocked", round)
		}
		if sends.Load() == 0 {
			t.Fatalf("round %d: no send at all", round)
		}
	}
}

// blackhole accepts TCP connections and never answers.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestCloseWithTheDatabaseUnreachable: a store on a caller's pool (New)
// whose server accepts connections and never answers (no connect_timeout
// in the URL, as a caller's pool may have). Every kind of after-commit
// send is pending when Close is called: Close waits closeSendWait for
// them, then cancels them.
func TestCloseWithTheDatabaseUnreachable(t *testing.T) {
	addr := blackhole(t)
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://u:p@%s/db?sslmode=disable&pool_max_conns=2", addr))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool)
	s.notify.trail(false)
	s.dueOut.add(time.Now().Add(time.Hour))
	s.announceDue(duePayload([]int64{time.Now().Add(time.Hour).UnixMicro()}))
	s.announceUpcoming()
	began := time.Now()
	s.Close()
	took := time.Since(began)
	began = time.Now()
	s.Close()
	t.Logf("Close with an unreachable database took %v (second Close %v)", took.Round(time.Millisecond), time.Since(began))
	if took > closeSendWait+2*time.Second {
		t.Errorf("Close blocked %v, want about closeSendWait (%v)", took, closeSendWait)
	}
}

// TestGoroutinesAfterClose opens a store, subscribes (the listener),
// enqueues, claims past a rate-limited key (a due row), completes a keyed
// job (a trailing NOTIFY), fails one, closes, and counts goroutines.
func TestGoroutinesAfterClose(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	before := runtime.NumGoroutine()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = sub
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		key := fmt.Sprintf("r:%d", i%3)
		if i%2 == 0 {
			key = fmt.Sprintf("c:%d", i%3)
		}
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Keys: []string{key}}, {Kind: "k", Keys: []string{key}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var cs []readpast.Completion
		var fs []readpast.Failure
		for i, j := range jobs {
			if i%2 == 0 {
				cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
			} else {
				fs = append(fs, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now().Add(time.Hour)})
			}
		}
		if len(cs) > 0 {
			if _, err := s.Complete(ctx, cs); err != nil {
				t.Fatal(err)
			}
		}
		if len(fs) > 0 {
			if _, err := s.Fail(ctx, fs); err != nil {
				t.Fatal(err)
			}
		}
	}
	during := runtime.NumGoroutine()
	s.Close()
	immediately := runtime.NumGoroutine()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := runtime.NumGoroutine()
	t.Logf("goroutines: before %d, during %d, right after Close %d, after settling %d", before, during, immediately, after)
	if after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines leaked: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
