package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// Adversarial replays of the promise: "a job that becomes
// claimable while workers wait is announced by a wake-up (Subscribe, or
// NOTIFY readpast to other processes) at or after the moment it becomes
// claimable, so it never waits for the poll interval". The worker is a
// store's Subscribe channel (this process's, or another store's on the
// same database: another process), polled never: it claims at every
// wake-up, and the replay fails when no wake-up at or after the moment
// the job became claimable delivered it within 3 s.

// aw2pgWorker subscribes w and waits until its listener is up (as seen
// from a, which counts the listening sessions).
func aw2pgWorker(t *testing.T, a, w *postgres.Store, listeners int) <-chan struct{} {
	t.Helper()
	ch, err := w.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitListeners(t, a, listeners)
	return ch
}

func aw2pgEnqueue(t *testing.T, s *postgres.Store, ps ...readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	js, err := s.Enqueue(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func aw2pgClaim(t *testing.T, s *postgres.Store, queue string, limit int) []*readpast.Job {
	t.Helper()
	got, err := s.Claim(context.Background(), claimQ("w", limit, queue))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// aw2pgCase runs body for a worker in this process (the store that
// claims and completes) and one in another process (a second store).
func aw2pgCase(t *testing.T, body func(t *testing.T, a, w *postgres.Store, ch <-chan struct{})) {
	for _, where := range []string{"this process", "another process"} {
		replay.Run(t, where, func(t *testing.T) {
			u := pgtest.URL(t)
			a := pgharness.Open(t, u)
			w := a
			if where == "another process" {
				w = pgharness.Open(t, u)
				t.Cleanup(func() { w.Close() })
			}
			t.Cleanup(func() { a.Close() })
			ch := aw2pgWorker(t, a, w, 1) // listening from the start, so it hears every announcement
			body(t, a, w, ch)
		})
	}
}

// aw2pgCompleteBeforeNextStart completes job j through a while key (its
// own limit) is out of tokens, once the claim's own announcements have
// gone, and expects a wake-up of worker w at or after the key's next
// start to deliver job want from queue q.
func aw2pgCompleteBeforeNextStart(t *testing.T, a, w *postgres.Store, ch <-chan struct{}, j *readpast.Job, key string, want int64, what string) {
	t.Helper()
	next := replay.NextStart(t, a, key, key)
	time.Sleep(20 * time.Millisecond) // the claim's "due:" NOTIFY, if any, has gone
	replay.Drain(ch)
	advComplete(t, a, j)
	if !time.Now().Before(next) {
		t.Skip("the completion came after the next start: no window")
	}
	replay.Delivered(t, w, ch, "q", want, next, what)
}

// TestAdvWakeControlFirstKeyFilledByClaim: a claim of two fills the key
// and leaves it out of tokens; a completion before its next start marks
// the next job then, and a wake-up at that start must deliver it.
func TestAdvWakeControlFirstKeyFilledByClaim(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 2, Rate: 2, Per: 500 * time.Millisecond, Burst: 2})
		js := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"},
			readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"}, readpast.EnqueueParams{Kind: "b", Queue: "q", Group: "g"})
		got := aw2pgClaim(t, a, "q", 10)
		if len(got) != 2 {
			t.Fatalf("first claim: %d jobs, want 2", len(got))
		}
		aw2pgCompleteBeforeNextStart(t, a, w, ch, got[0], "g", js[2].ID, "control: a key a claim filled")
	})
}

// TestAdvWakeTakeTokensLeavesFullKeyOutOfTokens: a claim fills a key
// (concurrency 1) and leaves it a token, so its due lists nothing;
// TakeTokens spends the token (no alarm, no NOTIFY). The completion
// before the key's next start marks the next job at that start (the
// trigger on readpast_groups) and its NOTIFY comes before it.
func TestAdvWakeTakeTokensLeavesFullKeyOutOfTokens(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		ctx := context.Background()
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 500 * time.Millisecond, Burst: 2})
		js := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"}, readpast.EnqueueParams{Kind: "b", Queue: "q", Group: "g"})
		got := aw2pgClaim(t, a, "q", 10)
		if len(got) != 1 || got[0].ID != js[0].ID {
			t.Fatalf("first claim: %d jobs, want a", len(got))
		}
		g, err := a.TakeTokens(ctx, "g", 1)
		if err != nil || !g.Granted {
			t.Fatalf("TakeTokens: %+v %v", g, err)
		}
		aw2pgCompleteBeforeNextStart(t, a, w, ch, got[0], "g", js[1].ID, "the next job of a full key TakeTokens left out of tokens")
	})
}

// TestAdvWakeLimitLoweredWhileKeyFull: a claim fills a key with tokens
// to spare; PutLimit lowers its rate (tat rescaled: no token left) while
// it is full; the change marks the next job due now and wakes the
// claimers, whose claim finds the key full and uses the mark up (claim.sql
// due lists a key's next start only when the claim took jobs of it). The
// completion marks the next job at the new next start.
func TestAdvWakeLimitLoweredWhileKeyFull(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 1, Rate: 10, Per: time.Second, Burst: 10})
		js := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "a", Queue: "q", Group: "g"}, readpast.EnqueueParams{Kind: "b", Queue: "q", Group: "g"})
		got := aw2pgClaim(t, a, "q", 10)
		if len(got) != 1 {
			t.Fatalf("first claim: %d jobs", len(got))
		}
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: time.Second, Burst: 1})
		// The change marks the key's next job due now and wakes the
		// claimers (mark_keys.sql); a worker's claim at that wake-up finds
		// the key full and uses the mark up.
		if again := aw2pgClaim(t, a, "q", 10); len(again) != 0 {
			t.Fatalf("a claim after the change got %d jobs of a full key", len(again))
		}
		aw2pgCompleteBeforeNextStart(t, a, w, ch, got[0], "g", js[1].ID, "the next job of a full key whose rate was lowered")
	})
}

// TestAdvWakeLaterKeyFilledByClaim: key h (concurrency 1, one start a
// 500 ms) is a later key of x (Keys [g, h]) in a claim of one job that
// reads g's mark only: h is in more_decided, not decided, so claim.sql's
// due (paced: decided keys only) lists no next start for it. A second
// claim reads h's own job z, finds h full and uses its mark up. x's
// completion marks z at h's next start.
func TestAdvWakeLaterKeyFilledByClaim(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		putLimit(t, a, readpast.Limit{Key: "h", Concurrency: 1, Rate: 1, Per: 500 * time.Millisecond, Burst: 1})
		putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 10})
		js := aw2pgEnqueue(t, a,
			readpast.EnqueueParams{Kind: "x", Queue: "q", Keys: []string{"g", "h"}},
			readpast.EnqueueParams{Kind: "z", Queue: "q", Group: "h"})
		got := aw2pgClaim(t, a, "q", 1)
		if len(got) != 1 || got[0].ID != js[0].ID {
			t.Fatalf("first claim: %d jobs, want x", len(got))
		}
		if again := aw2pgClaim(t, a, "q", 1); len(again) != 0 {
			t.Fatalf("second claim got %d jobs while h is full", len(again))
		}
		aw2pgCompleteBeforeNextStart(t, a, w, ch, got[0], "h", js[1].ID, "the next job of a later key a claim filled")
	})
}

// TestAdvWakeFlowChildReleasedBeforeItsRunAt: a flow child enqueued
// with a run_at ahead, blocked by its parent, which succeeds before that
// run_at: the child becomes pending, due at its run_at. flowStored sets
// alarms (and announces) for the flow's pending jobs only.
func TestAdvWakeFlowChildReleasedBeforeItsRunAt(t *testing.T) {
	aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
		runAt := time.Now().Add(400 * time.Millisecond)
		js, err := a.EnqueueFlow(context.Background(), []readpast.FlowJob{
			{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "parent"}},
			{Ref: "c", Job: readpast.EnqueueParams{Kind: "c", Queue: "child", RunAt: runAt}, After: []readpast.After{{Ref: "p"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := aw2pgClaim(t, a, "parent", 1)
		if len(p) != 1 {
			t.Fatal("parent not claimed")
		}
		time.Sleep(20 * time.Millisecond)
		replay.Drain(ch)
		advComplete(t, a, p[0])
		if !time.Now().Before(runAt) {
			t.Skip("no window")
		}
		c, err := a.Get(context.Background(), js[1].ID)
		if err != nil || c.State != readpast.StatePending {
			t.Fatalf("child: %v %v", c, err)
		}
		replay.Delivered(t, w, ch, "child", c.ID, c.RunAt, "a flow child released before its run_at")
	})
}

// TestAdvWakeBatchFinisherReleasedBeforeItsRunAt: a batch's finishing
// job with a run_at ahead, released by the seal (after the members
// ended) or by the last member's completion (after the seal) before that
// run_at. OpenBatch's flowStored skips it (blocked), SealBatch only
// broadcasts.
func TestAdvWakeBatchFinisherReleasedBeforeItsRunAt(t *testing.T) {
	for _, by := range []string{"seal", "last member's completion"} {
		t.Run(by, func(t *testing.T) {
			aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
				ctx := context.Background()
				runAt := time.Now().Add(400 * time.Millisecond)
				fin, err := a.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin", RunAt: runAt}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m", Queue: "m"}}); err != nil {
					t.Fatal(err)
				}
				m := aw2pgClaim(t, a, "m", 1)
				if len(m) != 1 {
					t.Fatal("member not claimed")
				}
				if by == "seal" {
					advComplete(t, a, m[0])
					time.Sleep(20 * time.Millisecond)
					replay.Drain(ch)
					if _, err := a.SealBatch(ctx, fin.ID); err != nil {
						t.Fatal(err)
					}
				} else {
					if _, err := a.SealBatch(ctx, fin.ID); err != nil {
						t.Fatal(err)
					}
					time.Sleep(20 * time.Millisecond)
					replay.Drain(ch)
					advComplete(t, a, m[0])
				}
				if !time.Now().Before(runAt) {
					t.Skip("no window")
				}
				j, err := a.Get(ctx, fin.ID)
				if err != nil || j.State != readpast.StatePending {
					t.Fatalf("finisher: %v %v", j, err)
				}
				replay.Delivered(t, w, ch, "fin", fin.ID, j.RunAt, "a batch finisher with a run_at ahead, released by the "+by)
			})
		})
	}
}

// TestAdvWakeNearFutureRunAtPaths: a job enqueued 30 ms ahead through
// each enqueue path of this store; the write's own wake-up comes before
// the run_at, an alarm must come at it (CreatedAt must be filled for the
// run_at-after-creation test in dueLater).
func TestAdvWakeNearFutureRunAtPaths(t *testing.T) {
	for _, path := range []string{"Enqueue", "EnqueueTx", "EnqueueFlow", "AddToBatch", "unique", "copy"} {
		t.Run(path, func(t *testing.T) {
			aw2pgCase(t, func(t *testing.T, a, w *postgres.Store, ch <-chan struct{}) {
				ctx := context.Background()
				var fin *readpast.Job
				if path == "AddToBatch" {
					var err error
					if fin, err = a.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}}); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(20 * time.Millisecond)
				replay.Drain(ch)
				p := readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: time.Now().Add(30 * time.Millisecond)}
				var (
					js  []*readpast.Job
					err error
				)
				switch path {
				case "Enqueue":
					js, err = a.Enqueue(ctx, []readpast.EnqueueParams{p})
				case "unique":
					p.UniqueKey = "u"
					js, err = a.Enqueue(ctx, []readpast.EnqueueParams{p})
				case "copy":
					ps := make([]readpast.EnqueueParams, 600)
					for i := range ps {
						ps[i] = readpast.EnqueueParams{Kind: "other", Queue: "elsewhere"}
					}
					ps[0] = p
					js, err = a.Enqueue(ctx, ps)
				case "EnqueueTx":
					tx, berr := a.Pool().Begin(ctx)
					if berr != nil {
						t.Fatal(berr)
					}
					js, err = a.EnqueueTx(ctx, tx, []readpast.EnqueueParams{p})
					if err == nil {
						err = tx.Commit(ctx)
					} else {
						tx.Rollback(ctx)
					}
				case "EnqueueFlow":
					js, err = a.EnqueueFlow(ctx, []readpast.FlowJob{{Ref: "a", Job: p}})
				case "AddToBatch":
					js, err = a.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{p})
				}
				if err != nil {
					t.Fatal(err)
				}
				if js[0].CreatedAt.IsZero() {
					t.Errorf("%s returned a job without CreatedAt", path)
				}
				replay.Delivered(t, w, ch, "q", js[0].ID, js[0].RunAt, "a job enqueued 30 ms ahead by "+path)
			})
		})
	}
}

// TestAdvWakeFullKeyProcessStartedAfterTheClaim: process A claims a
// key's first job from its queue (qa) and fills the key (concurrency 1,
// one start a 500 ms): the claim's "due:" NOTIFY lists the next start,
// but worker process B, which serves the key's other queue (q), starts
// listening only after it (a deploy, a restart, a listener reconnecting).
// B's due_upcoming reads run_ats and marks ahead: a full key has no mark,
// so B sets no alarm. A's completion before the next start marks the
// next job then; only A's own claimers (serving qa) are woken.
// Control: B listening before the claim.
func TestAdvWakeFullKeyProcessStartedAfterTheClaim(t *testing.T) {
	for _, later := range []bool{false, true} {
		name := "worker listening before the claim"
		if later {
			name = "worker started after the claim"
		}
		replay.Run(t, name, func(t *testing.T) {
			u := pgtest.URL(t)
			a := pgharness.Open(t, u)
			b := pgharness.Open(t, u)
			t.Cleanup(func() { a.Close(); b.Close() })
			var ch <-chan struct{}
			if !later {
				ch = aw2pgWorker(t, a, b, 1)
			}
			putLimit(t, a, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: 500 * time.Millisecond, Burst: 1})
			js := aw2pgEnqueue(t, a, readpast.EnqueueParams{Kind: "x", Queue: "qa", Group: "g"}, readpast.EnqueueParams{Kind: "z", Queue: "q", Group: "g"})
			got := aw2pgClaim(t, a, "qa", 1)
			if len(got) != 1 || got[0].ID != js[0].ID {
				t.Fatalf("first claim: %d jobs, want x", len(got))
			}
			next := replay.NextStart(t, a, "g", "g")
			if later {
				time.Sleep(20 * time.Millisecond) // the claim's NOTIFY has gone
				ch = aw2pgWorker(t, a, b, 1)
				time.Sleep(50 * time.Millisecond) // its due_upcoming read is over
			}
			time.Sleep(20 * time.Millisecond)
			replay.Drain(ch)
			advComplete(t, a, got[0])
			if !time.Now().Before(next) {
				t.Skip("no window")
			}
			replay.Delivered(t, b, ch, "q", js[1].ID, next, "the next job of a key a claim of another process filled, "+name)
		})
	}
}
