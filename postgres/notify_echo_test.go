package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestOwnEnqueueWakesItsClaimersOnce: a store wakes its own claimers when
// its enqueue commits, so its listener passes over the echo of that
// enqueue's NOTIFY (a second wake-up would only cost an empty claim),
// while every other store wakes for it. Writes whose claimers the store
// does not wake itself (an EnqueueTx, which commits in the caller's
// transaction; a completion that frees a key's slot) notify every
// listener, this store's too, also when a trailing NOTIFY covers them
// together with enqueues.
//
// Deterministic: notifications reach every listener in commit order, so
// once a store's listener has handled a later NOTIFY ("backlog", handed to
// FlowBacklog), it has handled the ones before it.
func TestOwnEnqueueWakesItsClaimersOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a, b := pgharness.Open(t, url), pgharness.Open(t, url)
	defer a.Close()
	defer b.Close()
	subA, err := a.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subB, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := a.Pool()
	notify := func(payload string) {
		t.Helper()
		if _, err := admin.Exec(ctx, "SELECT pg_notify('readpast', $1)", payload); err != nil {
			t.Fatal(err)
		}
	}
	// heard waits for a store's listener to hand over a "backlog" NOTIFY.
	heard := func(s *postgres.Store, within time.Duration) bool {
		select {
		case <-s.FlowBacklog():
			return true
		case <-time.After(within):
			return false
		}
	}
	woke := func(sub <-chan struct{}) bool {
		select {
		case <-sub:
			return true
		default:
			return false
		}
	}
	// Both listeners are up once both hear one NOTIFY. Each round waits
	// on both, so that no hand-over is left pending for a later round (a
	// listener not yet up never gets that round's NOTIFY).
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("the stores' listeners did not start within 10 rounds")
		}
		notify("backlog")
		heardA := heard(a, 2*time.Second)
		heardB := heard(b, 2*time.Second)
		if heardA && heardB {
			break
		}
	}
	// settle returns once both listeners handled every NOTIFY sent so far,
	// and what each store's claimers were woken for meanwhile.
	settle := func() (wokeA, wokeB bool) {
		t.Helper()
		notify("backlog")
		for _, s := range []*postgres.Store{a, b} {
			if !heard(s, 10*time.Second) {
				t.Fatal("a listener did not hand over a NOTIFY within 10 s")
			}
		}
		return woke(subA), woke(subB)
	}
	settle()

	// The listeners: the echo wakes b alone, an empty payload both.
	notify(postgres.EchoPayload(a))
	if wa, wb := settle(); wa || !wb {
		t.Fatalf("after a's echo payload: a woke %v (want false), b woke %v (want true)", wa, wb)
	}
	notify("")
	if wa, wb := settle(); !wa || !wb {
		t.Fatalf("after an empty payload: a woke %v, b woke %v (want both)", wa, wb)
	}

	// What each write sends, read on a plain LISTEN connection that
	// begins listening now.
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	if _, err := raw.Exec(ctx, "LISTEN readpast"); err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		for {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n, err := raw.WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: no NOTIFY within 10 s: %v", what, err)
			}
			if n.Payload != "backlog" && !strings.HasPrefix(n.Payload, "due:") {
				return n.Payload
			}
		}
	}
	echo := postgres.EchoPayload(a)
	one := []readpast.EnqueueParams{{Kind: "k", Queue: "q"}}

	postgres.SetNotifyEvery(a, 0) // every enqueue notifies in its statement
	if _, err := a.Enqueue(ctx, one); err != nil {
		t.Fatal(err)
	}
	if p := next("an enqueue notifying in its statement"); !strings.HasPrefix(p, echo+":") {
		t.Fatalf("an enqueue's own NOTIFY said %q, want a's echo %q and its number", p, echo)
	}

	postgres.SetNotifyEvery(a, time.Hour) // the next enqueues leave it to the trailing NOTIFY
	if _, err := a.Enqueue(ctx, one); err != nil {
		t.Fatal(err)
	}
	postgres.FlushNotify(a)
	if p := next("a trailing NOTIFY covering enqueues"); p != echo {
		t.Fatalf("a trailing NOTIFY covering enqueues said %q, want a's echo %q", p, echo)
	}

	tx, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.EnqueueTx(ctx, tx, one); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if p := next("an EnqueueTx"); p != "" {
		t.Fatalf("an EnqueueTx's NOTIFY said %q, want an empty payload", p)
	}

	// A completion that frees a key's slot, covered by one trailing NOTIFY
	// with an enqueue.
	if _, err := a.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "g", Group: "g:1"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := a.Claim(ctx, readpast.ClaimParams{Queues: []string{"g"}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(jobs))
	}
	if _, err := a.Enqueue(ctx, one); err != nil {
		t.Fatal(err)
	}
	errs, err := a.Complete(ctx, []readpast.Completion{{ID: jobs[0].ID, Token: jobs[0].Token}})
	if err != nil || errs[0] != nil {
		t.Fatalf("complete: %v %v", err, errs)
	}
	postgres.FlushNotify(a)
	if p := next("a trailing NOTIFY covering an enqueue and a completion"); p != "" {
		t.Fatalf("a trailing NOTIFY covering a completion that freed a slot said %q, want an empty payload", p)
	}
}
