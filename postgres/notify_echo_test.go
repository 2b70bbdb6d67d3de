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
	e := newEchoAdv(t, url) // two stores, listeners up (echo_adversary_test.go)
	a, notify, settle := e.a, e.notify, e.settle

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
