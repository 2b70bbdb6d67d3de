package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// TestHotStatementsNotifyAfterCommit: the claim and completion statements
// send no NOTIFY of their own, so that their transactions never hold
// PostgreSQL's notify lock through their commits. The claim returns the
// next start of a key it left out of tokens in a row of its own, the
// completion whether it freed a key's slot, and the store announces both
// once they have committed; a completion inside a caller's transaction
// (CompleteTx) still notifies in it.
func TestHotStatementsNotifyAfterCommit(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	advPut(t, s, readpast.Limit{Key: "r:*", Concurrency: 10, Rate: 1, Per: time.Hour, Burst: 1})
	advEnq(t, s, []string{"r:1"}, []string{"r:1"})
	l := advNotifyListen(t, s)
	advNotifyHeard(l, 200*time.Millisecond) // the enqueue's

	// The claim routine by hand, in a transaction: one job (the key's
	// only token) and the row listing the key's next start.
	token := uuid.NewString()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, postgres.ClaimCall, []string{readpast.DefaultQueue}, "w", int64(10),
		time.Minute.Microseconds(), token, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	var due string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] == nil {
			due, _ = vals[len(vals)-1].(string)
			continue
		}
		ids = append(ids, vals[0].(int64))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || !strings.HasPrefix(due, "due:") {
		t.Fatalf("the claim returned jobs %v and due row %q, want one job and the key's next start", ids, due)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := advNotifyHeard(l, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("the claim statement notified %q itself", got)
	}

	// The completion routine by hand: the key has room, so it counts the
	// slot aside (nothing waits for it) and says it freed none, without
	// notifying.
	var (
		id            int64
		tok           string
		parent, freed bool
	)
	err = s.Pool().QueryRow(ctx, postgres.CompleteCall, []int64{ids[0]}, []string{token}, []*string{nil}, false).
		Scan(&id, &tok, &parent, &freed)
	if err != nil {
		t.Fatal(err)
	}
	if id != ids[0] || freed {
		t.Fatalf("completed %d freed=%v, want %d and no slot freed on the key's row", id, freed, ids[0])
	}
	if got := advNotifyHeard(l, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("the completion statement notified %q itself", got)
	}

	// Through the store: a claim that leaves a key out of tokens announces
	// its next start once committed, and a completion that frees a slot
	// wakes the other processes.
	advEnq(t, s, []string{"r:2"}, []string{"r:2"})
	advNotifyHeard(l, 200*time.Millisecond)
	jobs := mustClaim(t, s, "w", 10)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1 (r:2 has one token)", len(jobs))
	}
	if got := advNotifyHeard(l, 300*time.Millisecond); !advNotifyHas(got, true) {
		t.Errorf("after the store's claim heard %q, want the key's next start (due:...)", got)
	}
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: jobs[0].ID, Token: jobs[0].Token}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	advNotifyHeard(l, 300*time.Millisecond)
	// A completion that frees a full key's slot on its row.
	advPut(t, s, readpast.Limit{Key: "f:*", Concurrency: 1})
	advEnq(t, s, []string{"f:1"})
	advNotifyHeard(l, 200*time.Millisecond)
	jobs = mustClaim(t, s, "w", 10)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	advNotifyHeard(l, 200*time.Millisecond)
	errs, err = s.Complete(ctx, []readpast.Completion{{ID: jobs[0].ID, Token: jobs[0].Token}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got := advNotifyHeard(l, 300*time.Millisecond); !advNotifyHas(got, false) {
		t.Errorf("after the store's completion heard %q, want a wake-up", got)
	}

	// CompleteTx: the statement notifies, delivered when the caller commits.
	advPut(t, s, readpast.Limit{Key: "c:*", Concurrency: 1})
	advEnq(t, s, []string{"c:1"})
	advNotifyHeard(l, 200*time.Millisecond)
	jobs = mustClaim(t, s, "w", 10)
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	advNotifyHeard(l, 200*time.Millisecond)
	tx, err = s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: jobs[0].ID, Token: jobs[0].Token}); err != nil {
		t.Fatal(err)
	}
	if got := advNotifyHeard(l, 200*time.Millisecond); len(got) != 0 {
		t.Errorf("heard %q before the caller's transaction committed", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := advNotifyHeard(l, 300*time.Millisecond); !advNotifyHas(got, false) {
		t.Errorf("after CompleteTx committed heard %q, want a wake-up", got)
	}
}
