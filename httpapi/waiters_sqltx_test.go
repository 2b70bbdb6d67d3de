package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// TestWaitingClaimsGetAJobEnqueuedInTheCallersTx: a job enqueued on
// SQLite inside the caller's transaction (EnqueueSQLTx) reaches a waiting
// claim when the transaction commits, while a claim of its group is in
// flight and another request arrives before the commit. The poll is an
// hour away, so only a wake-up can deliver it. When the store woke its
// claimers before the commit, the request arriving then claimed on
// arrival, found nothing (the job was not committed) and, as every claim
// clears its group's due mark when it begins, the commit left no one to
// look: the job waited for the poll.
func TestWaitingClaimsGetAJobEnqueuedInTheCallersTx(t *testing.T) {
	as := newAdvStore()
	var lite *sqlite.Store
	e := newEnv(t, func(c *Config) {
		lite = c.Store.(*sqlite.Store)
		as.Store = c.Store
		c.Store = as
		c.PollInterval = time.Hour
	})
	// X claims on arrival (a new group); its claim finds nothing and
	// stalls before returning: a claim of the group in flight.
	as.stallNext.Store(true)
	x := claimAsync(e, "q", 1)
	<-as.stalled

	ctx := context.Background()
	tx, err := lite.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := lite.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	// Y arrives before the commit and waits, after a claim on arrival if
	// the group was due.
	y := claimAsync(e, "q", 1)
	advUntil(t, "Y waits", func() bool {
		ok := false
		advGroup(e, "q", func(g *waitGroup) { ok = len(g.queue) == 2 && g.claiming == 1 })
		return ok
	})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	close(as.release) // X's claim ends, empty
	var js []Job
	select {
	case js = <-x:
	case js = <-y:
	case <-time.After(5 * time.Second):
		t.Fatal("no waiting claim got the committed job within 5 s (the poll is an hour away): a lost wake-up")
	}
	if len(js) != 1 {
		t.Fatalf("a waiting claim ended with %d jobs, want 1", len(js))
	}
}
