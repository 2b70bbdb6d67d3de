package sqlite_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/sqlite"
)

// Adversarial replays of the promise: "a job that becomes
// claimable while workers wait is announced by a wake-up at or after the
// moment it becomes claimable, so it never waits for the poll interval".
// Each replay subscribes (a worker polling once an hour), claims at every
// wake-up as a worker would, and fails if the job is claimable, yet no
// wake-up came at or after the moment it became so within 3 s.

func aw2Enqueue(t *testing.T, s *sqlite.Store, ps ...readpast.EnqueueParams) []*readpast.Job {
	t.Helper()
	js, err := s.Enqueue(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func aw2Claim(t *testing.T, s *sqlite.Store, queue string, limit int) []*readpast.Job {
	t.Helper()
	got, err := s.Claim(context.Background(), readpast.ClaimParams{Queues: []string{queue}, Worker: "w", Limit: limit, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// aw2Exit ends a running job the way named: every exit that frees a slot
// and leaves the job gone (the key's next job is marked by announceHeads
// only).
func aw2Exit(t *testing.T, s *sqlite.Store, how string, j *readpast.Job) {
	t.Helper()
	ctx := context.Background()
	switch how {
	case "complete":
		res, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
		if err != nil || res[0] != nil {
			t.Fatal(err, res)
		}
	case "completeSQLTx":
		tx, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token}); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	case "fail for good":
		res, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x", Discard: true}})
		if err != nil || res[0] != nil {
			t.Fatal(err, res)
		}
	case "cancel":
		if _, err := s.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("exit %q", how)
	}
}

var aw2Exits = []string{"complete", "completeSQLTx", "fail for good", "cancel"}

// aw2ExitBeforeNextStart ends job j (how: aw2Exit) while key (its own
// limit) is out of tokens, and expects a wake-up at or after the key's
// next start to deliver job want.
func aw2ExitBeforeNextStart(t *testing.T, s *sqlite.Store, how string, j *readpast.Job, key string, want int64, what string) {
	t.Helper()
	next := replay.NextStart(t, s, key, key)
	ch, err := s.Subscribe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	aw2Exit(t, s, how, j)
	if !time.Now().Before(next) {
		t.Skip("the exit came after the next start: no window")
	}
	replay.Delivered(t, s, ch, readpast.DefaultQueue, want, next, what)
}

// TestAdvWakeTakeTokensLeavesFullKeyOutOfTokens: a key of concurrency 1
// and a rate (burst 2). A claim fills the key and leaves it one token, so
// it sets no alarm (claimIn: the next start is not ahead). TakeTokens then
// spends that token for work outside jobs: the key is full and out of
// tokens, and TakeTokens sets no alarm either. The running job's exit
// before the next start frees the slot and marks the key's next job at
// that start (announceHeads), which wakes no one: "the claim that spent
// them set an alarm for it", but no claim spent them.
func TestAdvWakeTakeTokensLeavesFullKeyOutOfTokens(t *testing.T) {
	for _, how := range aw2Exits {
		replay.Run(t, how, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			per := 500 * time.Millisecond
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: per, Burst: 2}); err != nil {
				t.Fatal(err)
			}
			js := aw2Enqueue(t, s, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "b", Group: "g"})
			got := aw2Claim(t, s, readpast.DefaultQueue, 10)
			if len(got) != 1 || got[0].ID != js[0].ID {
				t.Fatalf("first claim: %d jobs, want a", len(got))
			}
			g, err := s.TakeTokens(ctx, "g", 1)
			if err != nil || !g.Granted {
				t.Fatalf("TakeTokens: %+v %v", g, err)
			}
			aw2ExitBeforeNextStart(t, s, how, got[0], "g", js[1].ID, "the next job of a full key TakeTokens left out of tokens, after a "+how)
		})
	}
}

// TestAdvWakeLimitLoweredWhileKeyFull: a key of concurrency 1 with a
// generous rate; a claim fills it and leaves it tokens (no alarm). A
// PutLimit then lowers the rate: the rescaled bucket has no token left,
// and the change marks nothing (the key is full) and sets no alarm. The
// job's completion before the new next start marks the next job then and
// wakes no one.
func TestAdvWakeLimitLoweredWhileKeyFull(t *testing.T) {
	replay.Windowed(t, func(t *testing.T) {
		ctx := context.Background()
		s := openTemp(t)
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 10, Per: time.Second, Burst: 10}); err != nil {
			t.Fatal(err)
		}
		js := aw2Enqueue(t, s, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "b", Group: "g"})
		got := aw2Claim(t, s, readpast.DefaultQueue, 10)
		if len(got) != 1 {
			t.Fatalf("first claim: %d jobs", len(got))
		}
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: time.Second, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		// A worker woken by the change claims: the key is full.
		if again := aw2Claim(t, s, readpast.DefaultQueue, 10); len(again) != 0 {
			t.Fatalf("a claim after the change got %d jobs of a full key", len(again))
		}
		next := replay.NextStart(t, s, "g", "g")
		t.Logf("next start in %v", time.Until(next).Round(time.Millisecond))
		ch, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		aw2Exit(t, s, "complete", got[0])
		if !time.Now().Before(next) {
			t.Skip("no window")
		}
		replay.Delivered(t, s, ch, readpast.DefaultQueue, js[1].ID, next, "the next job of a full key whose rate was lowered")
	})
}

// TestAdvWakeLaterKeyFilledByClaim: key h (concurrency 1, one start per
// 500 ms) is only a later key of job x (Keys [g, h]) in the claim that
// takes x: the claim reads g's mark alone (limit 1), so h is not among the
// keys it looks at, and its "filled and left out of tokens" alarm
// (claimIn's next, for looked-at keys only) is never set; saveLater sets
// none. A second claim reads h's own job z, finds h full, and uses up
// its mark. x's completion before h's next start frees h and marks z at
// that start, waking no one.
func TestAdvWakeLaterKeyFilledByClaim(t *testing.T) {
	for _, how := range aw2Exits {
		replay.Run(t, how, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			per := 500 * time.Millisecond
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: "h", Concurrency: 1, Rate: 1, Per: per, Burst: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 10}); err != nil {
				t.Fatal(err)
			}
			js := aw2Enqueue(t, s,
				readpast.EnqueueParams{Kind: "x", Keys: []string{"g", "h"}},
				readpast.EnqueueParams{Kind: "z", Group: "h"})
			got := aw2Claim(t, s, readpast.DefaultQueue, 1)
			if len(got) != 1 || got[0].ID != js[0].ID {
				t.Fatalf("first claim: %d jobs, want x", len(got))
			}
			if again := aw2Claim(t, s, readpast.DefaultQueue, 1); len(again) != 0 {
				t.Fatalf("second claim got %d jobs while h is full", len(again))
			}
			aw2ExitBeforeNextStart(t, s, how, got[0], "h", js[1].ID, "the next job of a later key a claim filled, after a "+how)
		})
	}
}

// TestAdvWakeControlFirstKeyFilledByClaim: the key is the claim's first
// key, filled and left out of tokens by a claim of two; an exit before
// its next start marks the next job then, and a wake-up at that start
// must deliver it.
func TestAdvWakeControlFirstKeyFilledByClaim(t *testing.T) {
	for _, how := range aw2Exits {
		replay.Run(t, how, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			per := 500 * time.Millisecond
			if _, err := s.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 2, Rate: 2, Per: per, Burst: 2}); err != nil {
				t.Fatal(err)
			}
			js := aw2Enqueue(t, s, readpast.EnqueueParams{Kind: "a", Group: "g"}, readpast.EnqueueParams{Kind: "a", Group: "g"},
				readpast.EnqueueParams{Kind: "b", Group: "g"})
			got := aw2Claim(t, s, readpast.DefaultQueue, 10)
			if len(got) != 2 {
				t.Fatalf("first claim: %d jobs, want 2", len(got))
			}
			aw2ExitBeforeNextStart(t, s, how, got[0], "g", js[2].ID, "control: first key filled by a claim of two, after a "+how)
		})
	}
}

// TestAdvWakeNearFutureRunAtPaths: a job enqueued a few ms ahead through
// each enqueue path; after the write's own wake-up, an alarm must come at
// its run_at.
func TestAdvWakeNearFutureRunAtPaths(t *testing.T) {
	for _, path := range []string{"Enqueue", "EnqueueSQLTx", "EnqueueFlow", "AddToBatch", "unique"} {
		t.Run(path, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			var b *readpast.Job
			if path == "AddToBatch" {
				var err error
				if b, err = s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}}); err != nil {
					t.Fatal(err)
				}
			}
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p := readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: time.Now().Add(30 * time.Millisecond)}
			var js []*readpast.Job
			switch path {
			case "Enqueue":
				js, err = s.Enqueue(ctx, []readpast.EnqueueParams{p})
			case "unique":
				p.UniqueKey = "u"
				js, err = s.Enqueue(ctx, []readpast.EnqueueParams{p})
			case "EnqueueSQLTx":
				var tx *sql.Tx
				if tx, err = s.DB().BeginTx(ctx, nil); err != nil {
					t.Fatal(err)
				}
				js, err = s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{p})
				if err == nil {
					err = tx.Commit()
				} else {
					tx.Rollback()
				}
			case "EnqueueFlow":
				js, err = s.EnqueueFlow(ctx, []readpast.FlowJob{{Ref: "a", Job: p}})
			case "AddToBatch":
				js, err = s.AddToBatch(ctx, b.ID, []readpast.EnqueueParams{p})
			}
			if err != nil {
				t.Fatal(err)
			}
			replay.Delivered(t, s, ch, "q", js[0].ID, js[0].RunAt, "a job enqueued 30 ms ahead by "+path)
		})
	}
}

// TestAdvWakeFlowChildReleasedBeforeItsRunAt: a child with a run_at
// ahead whose parent succeeds before it: the child becomes pending, not
// yet due. An alarm at its run_at must deliver it.
func TestAdvWakeFlowChildReleasedBeforeItsRunAt(t *testing.T) {
	replay.Windowed(t, func(t *testing.T) {
		ctx := context.Background()
		s := openTemp(t)
		runAt := time.Now().Add(400 * time.Millisecond)
		js, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
			{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "parent"}},
			{Ref: "c", Job: readpast.EnqueueParams{Kind: "c", Queue: "child", RunAt: runAt}, After: []readpast.After{{Ref: "p"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := aw2Claim(t, s, "parent", 1)
		if len(p) != 1 {
			t.Fatal("parent not claimed")
		}
		ch, err := s.Subscribe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		aw2Exit(t, s, "complete", p[0])
		if !time.Now().Before(runAt) {
			t.Skip("no window")
		}
		replay.Delivered(t, s, ch, "child", js[1].ID, js[1].RunAt, "a flow child released before its run_at")
	})
}

// TestAdvWakeBatchFinisherReleasedBeforeItsRunAt: a batch whose
// finishing job has a run_at ahead. OpenBatch sets no alarm for it (the
// finisher is blocked; flowStored is not called), and the member's
// completion that releases it after the seal (or the seal itself, after
// the last member ended) wakes the claimers before the run_at: their claim
// finds nothing, and nothing wakes them at the run_at.
func TestAdvWakeBatchFinisherReleasedBeforeItsRunAt(t *testing.T) {
	for _, by := range []string{"last member's completion", "seal", "seal whose context ends after its commit"} {
		replay.Run(t, by, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			runAt := time.Now().Add(400 * time.Millisecond)
			fin, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin", RunAt: runAt}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{{Kind: "m", Queue: "m"}}); err != nil {
				t.Fatal(err)
			}
			m := aw2Claim(t, s, "m", 1)
			if len(m) != 1 {
				t.Fatal("member not claimed")
			}
			var ch <-chan struct{}
			if by != "last member's completion" {
				aw2Exit(t, s, "complete", m[0])
				if ch, err = s.Subscribe(ctx); err != nil {
					t.Fatal(err)
				}
				sctx := ctx
				if by != "seal" {
					// The caller's deadline passes right after the release
					// commits (adv4CommitCtx, wake_adversary_test.go).
					watch, err := sql.Open("sqlite", "file:"+s.Path()+"?mode=ro")
					if err != nil {
						t.Fatal(err)
					}
					defer watch.Close()
					released := func() bool {
						var state string
						return watch.QueryRow("SELECT state FROM readpast_jobs WHERE id = ?", fin.ID).Scan(&state) == nil &&
							state == string(readpast.StatePending)
					}
					sctx = &adv4CommitCtx{Context: ctx, check: released, ch: make(chan struct{})}
				}
				_, err := s.SealBatch(sctx, fin.ID)
				if by == "seal" && err != nil {
					t.Fatal(err)
				}
				t.Logf("SealBatch: %v", err)
			} else {
				if _, err := s.SealBatch(ctx, fin.ID); err != nil {
					t.Fatal(err)
				}
				if ch, err = s.Subscribe(ctx); err != nil {
					t.Fatal(err)
				}
				aw2Exit(t, s, "complete", m[0])
			}
			if !time.Now().Before(runAt) {
				t.Skip("no window")
			}
			j, err := s.Get(ctx, fin.ID)
			if err != nil || j.State != readpast.StatePending {
				t.Fatalf("finisher: %v %v", j, err)
			}
			replay.Delivered(t, s, ch, "fin", fin.ID, j.RunAt, "a batch finisher with a run_at ahead, released by the "+by)
		})
	}
}
