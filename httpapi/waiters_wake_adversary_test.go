package httpapi

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/storetest/pgharness"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// adv4Store records every Claim the waiters make: when it began and
// ended and how many jobs it got, and can stall the next one after its
// statement.
type adv4Store struct {
	readpast.Store

	mu     sync.Mutex
	claims []adv4Claim
}

type adv4Claim struct {
	began, ended time.Time
	queues       []string
	got          int
}

func (a *adv4Store) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	began := time.Now()
	jobs, err := a.Store.Claim(ctx, p)
	a.mu.Lock()
	a.claims = append(a.claims, adv4Claim{began: began, ended: time.Now(), queues: p.Queues, got: len(jobs)})
	a.mu.Unlock()
	return jobs, err
}

func (a *adv4Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	return a.Store.(readpast.Notifier).Subscribe(ctx)
}

func (a *adv4Store) snapshot() []adv4Claim {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]adv4Claim(nil), a.claims...)
}

// adv4Envs are the two stores, each behind an adv4Store, polled once an
// hour: only wake-ups deliver jobs.
func adv4Envs(t *testing.T, store string) (*testEnv, *adv4Store) {
	as := &adv4Store{}
	mut := func(c *Config) {
		as.Store = c.Store
		c.Store = as
		c.PollInterval = time.Hour
	}
	if store == "sqlite" {
		return newEnv(t, mut), as
	}
	e := newPostgresEnv(t, mut)
	listening(t, e.store.(*postgres.Store))
	return e, as
}

// adv4Claim sends a waiting claim and returns a channel of its jobs.
func adv4ClaimReq(e *testEnv, queue string, limit int, wait int) <-chan []Job {
	got := make(chan []Job, 1)
	go func() {
		status, b := e.doCtx(context.Background(), "POST", "/v1/claim",
			fmt.Sprintf(`{"worker":"w","queues":["%s"],"limit":%d,"wait_seconds":%d}`, queue, limit, wait), "")
		var r JobsResponse
		if status == 200 {
			_ = json.Unmarshal(b, &r)
		}
		got <- r.Jobs
	}()
	return got
}

// adv4Waiting waits until the group of queue has n waiters and no claim
// in flight.
func adv4Waiting(t *testing.T, e *testEnv, queue string, n int) {
	t.Helper()
	advUntil(t, "the waiters settle", func() bool {
		ok := false
		advGroup(e, queue, func(g *waitGroup) {
			ok = g != nil && len(g.queue) == n && g.claiming == 0 && g.holder == nil && !g.due
		})
		return ok
	})
}

// TestAdvWakeNearFutureRunAt: a job enqueued with a run_at a few
// milliseconds ahead while a request waits for its queue. Its enqueue's
// wake-up starts a claim before the run_at, which finds it not yet due;
// the job becomes claimable a moment later. A store that wakes its
// claimers again at the run_at delivers it; PostgreSQL sets no alarm for
// a run_at within dueSoon (20 ms) of now (postgres/due.go dueAt), and
// the claim that came back empty was a full one (no position yet), so no
// short-claim wake-up (claimfrom.go wakeAtFull) follows either: the job
// waits for the poll, an hour away.
//
// The verdict is taken only when the replay happened: a claim began after
// the enqueue returned and ended before the run_at (found it not due).
func TestAdvWakeNearFutureRunAt(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			e, as := adv4Envs(t, store)
			ctx := context.Background()
			for attempt := 0; attempt < 20; attempt++ {
				queue := fmt.Sprintf("soon%d", attempt)
				got := adv4ClaimReq(e, queue, 1, 4)
				adv4Waiting(t, e, queue, 1)
				runAt := time.Now().Add(20 * time.Millisecond)
				js, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: queue, RunAt: runAt}})
				if err != nil {
					t.Fatal(err)
				}
				enqueued := time.Now()
				jobs := <-got
				replayed := false
				for _, c := range as.snapshot() {
					if len(c.queues) == 1 && c.queues[0] == queue && c.began.After(enqueued) && c.ended.Before(js[0].RunAt) && c.got == 0 {
						replayed = true
					}
				}
				if !replayed {
					if len(jobs) == 1 {
						continue // the wake-up's claim came after the run_at: no window
					}
					t.Logf("attempt %d: no claim ran inside the window, yet the waiting claim got nothing", attempt)
					continue
				}
				if len(jobs) != 1 {
					var log []string
					for _, c := range as.snapshot() {
						if len(c.queues) == 1 && c.queues[0] == queue {
							log = append(log, fmt.Sprintf("claim at run_at%+v..%+v got %d", c.began.Sub(js[0].RunAt).Round(time.Microsecond), c.ended.Sub(js[0].RunAt).Round(time.Microsecond), c.got))
						}
					}
					left, _ := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Worker: "check", Limit: 1, Lease: time.Minute})
					t.Fatalf("a request waiting 4 s got %d jobs: job %d (run_at %v after its enqueue returned) was claimable all along (a plain claim now gets %d), but after the wake-up's claim found it not yet due, no wake-up came at its run_at; claims: %v",
						len(jobs), js[0].ID, js[0].RunAt.Sub(enqueued).Round(time.Microsecond), len(left), log)
				}
				return
			}
			t.Skip("the window never came up in 20 attempts")
		})
	}
}

// adv4BeginSQLTx begins a transaction of the caller's on store's
// database, for its SQLTx methods.
func adv4BeginSQLTx(t *testing.T, store readpast.Store) *sql.Tx {
	t.Helper()
	if lite, ok := store.(*sqlite.Store); ok {
		tx, err := lite.DB().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	return pgharness.BeginSQLTx(t, store)
}

// adv4CommitThenDelivered lets the claim an early wake-up starts, if any,
// end (a request waiting for queue claims, clearing its group's due
// mark, and finds nothing: claims counted by as past before), commits tx,
// and then requires the waiting request's answer got to hold one job,
// want.
func adv4CommitThenDelivered(t *testing.T, e *testEnv, as *adv4Store, before int, queue string, tx *sql.Tx, got <-chan []Job, want string) {
	t.Helper()
	early := false
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if len(as.snapshot()) > before {
			early = true
			break
		}
		time.Sleep(time.Millisecond)
	}
	if early {
		adv4Waiting(t, e, queue, 1)
	}
	t.Logf("a claim before the commit: %v", early)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case js := <-got:
		if len(js) != 1 {
			t.Fatalf("the waiting claim ended with %d jobs, want %s (early claim before the commit: %v)", len(js), want, early)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}

// TestAdvWakeFlowSQLTxWakesBeforeCommit: on PostgreSQL,
// EnqueueFlowSQLTx (and AddToBatchSQLTx) wake the store's claimers as
// they return, before the caller's transaction commits (flowStored). A
// request waiting for the queue claims then (clearing its group's due
// mark) and finds nothing. Once the caller commits, the statement's
// NOTIFY must wake it again.
func TestAdvWakeFlowSQLTxWakesBeforeCommit(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		for _, op := range []string{"flow", "batch"} {
			t.Run(store+"/"+op, func(t *testing.T) {
				e, as := adv4Envs(t, store)
				ctx := context.Background()
				var batchID int64
				if op == "batch" {
					b, err := e.store.(readpast.BatchStore).OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}})
					if err != nil {
						t.Fatal(err)
					}
					batchID = b.ID
				}
				got := adv4ClaimReq(e, "f", 1, 5)
				adv4Waiting(t, e, "f", 1)
				before := len(as.snapshot())

				tx := adv4BeginSQLTx(t, e.store)
				defer tx.Rollback()
				var err error
				if op == "flow" {
					_, err = e.store.(readpast.FlowSQLTxStore).EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Ref: "a", Job: readpast.EnqueueParams{Kind: "k", Queue: "f"}}})
				} else {
					_, err = e.store.(readpast.BatchSQLTxStore).AddToBatchSQLTx(ctx, tx, batchID, []readpast.EnqueueParams{{Kind: "k", Queue: "f"}})
				}
				if err != nil {
					t.Fatal(err)
				}
				adv4CommitThenDelivered(t, e, as, before, "f", tx, got, "the committed one")
			})
		}
	}
}

// TestAdvWakeCompleteSQLTxReleasesChild: CompleteSQLTx of a flow's
// parent inside the caller's transaction releases its child when the
// transaction commits. PostgreSQL wakes its claimers before the commit
// (pendingAgain); a request waiting for the child's queue claims then and
// finds nothing. The commit must wake it again.
func TestAdvWakeCompleteSQLTxReleasesChild(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			e, as := adv4Envs(t, store)
			ctx := context.Background()
			if _, err := e.store.(readpast.FlowStore).EnqueueFlow(ctx, []readpast.FlowJob{
				{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "parent"}},
				{Ref: "c", Job: readpast.EnqueueParams{Kind: "c", Queue: "child"}, After: []readpast.After{{Ref: "p"}}},
			}); err != nil {
				t.Fatal(err)
			}
			ps, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"parent"}, Worker: "w", Limit: 1, Lease: time.Minute})
			if err != nil || len(ps) != 1 {
				t.Fatalf("claim parent: %v %v", ps, err)
			}
			got := adv4ClaimReq(e, "child", 1, 5)
			adv4Waiting(t, e, "child", 1)
			before := len(as.snapshot())
			tx := adv4BeginSQLTx(t, e.store)
			defer tx.Rollback()
			if err := e.store.(readpast.SQLTxStore).CompleteSQLTx(ctx, tx, readpast.Completion{ID: ps[0].ID, Token: ps[0].Token}); err != nil {
				t.Fatal(err)
			}
			adv4CommitThenDelivered(t, e, as, before, "child", tx, got, "the released child")
		})
	}
}

// TestAdvWakeCompletionFreesKeyOutOfTokens: a key with concurrency 1
// and a rate of one start per 300 ms. A request waits for the queue
// while the key's first job runs; the job completes before the key's
// next start, freeing the slot: the key's next job becomes claimable at
// that start. A wake-up must deliver it to the waiting request.
func TestAdvWakeCompletionFreesKeyOutOfTokens(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		replay.Run(t, store, func(t *testing.T) {
			e, _ := adv4Envs(t, store)
			ctx := context.Background()
			per := 300 * time.Millisecond
			if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: per, Burst: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a", Queue: "rk", Group: "g"}, {Kind: "b", Queue: "rk", Group: "g"}}); err != nil {
				t.Fatal(err)
			}
			first, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rk"}, Worker: "w", Limit: 1, Lease: time.Minute})
			if err != nil || len(first) != 1 {
				t.Fatalf("claim: %v %v", first, err)
			}
			took := time.Now()
			got := adv4ClaimReq(e, "rk", 1, 4)
			adv4Waiting(t, e, "rk", 1)
			res, err := e.store.Complete(ctx, []readpast.Completion{{ID: first[0].ID, Token: first[0].Token}})
			if err != nil || res[0] != nil {
				t.Fatal(err, res)
			}
			if time.Since(took) >= per {
				t.Skip("completed after the next start: no window")
			}
			js := <-got
			if len(js) != 1 {
				left, _ := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rk"}, Worker: "check", Limit: 1, Lease: time.Minute})
				t.Fatalf("the waiting request (4 s) got %d jobs; the key's next job was claimable from %v after the first claim (a plain claim now gets %d): no wake-up at the key's next start", len(js), per, len(left))
			}
		})
	}
}
