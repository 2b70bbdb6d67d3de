package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestCancelledHeadWhileAFinisherHoldsTheGroup: group g (limit 1)
// runs R (queue o); its head P waits in paused queue p, and its next job O
// in queue o. A claim of o holds g while it is full and uses O's mark up.
// A caller's CompleteTx of R frees g's slot; its trigger marks g's head,
// P, in p; the transaction stays open. Meanwhile P is cancelled: the
// cancel commits (it does not touch g's row: P was pending) and
// markGroupHeads reads g's committed row, still full, and marks nothing.
// Then the caller commits. g is free, O is its head and due, and no mark
// leads to it but P's stale one, in a queue nobody reads. The promise: a
// paused queue holds g back only until its job is cancelled.
func TestCancelledHeadWhileAFinisherHoldsTheGroup(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	enqueue, claimO := groupG(t, s)
	r := enqueue("o")
	if c := claimO(); len(c) != 1 || c[0].ID != r.ID {
		t.Fatalf("first claim took %v; want [%d]", ids(c), r.ID)
	}
	running := getJob(t, s, r.ID)
	p := enqueue("p")
	o := enqueue("o")
	if err := s.PauseQueue(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if c := claimO(); len(c) != 0 { // g full: uses O's mark up
		t.Fatalf("claim while g is full took %v", ids(c))
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: r.ID, Token: running.Token}); err != nil {
		t.Fatal(err)
	}
	within(t, "Cancel of g's pending head beside an open CompleteTx", 5*time.Second,
		async(func() error { _, err := s.Cancel(ctx, p.ID); return err }))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c := claimO()
	if fmt.Sprint(ids(c)) != fmt.Sprint([]int64{o.ID}) {
		var marks []string
		rows, _ := s.Pool().Query(ctx, "SELECT queue || ':' || job_id FROM readpast_group_ready WHERE group_key = 'g'")
		for rows.Next() {
			var m string
			_ = rows.Scan(&m)
			marks = append(marks, m)
		}
		rows.Close()
		t.Fatalf("after g's head %d (paused queue p) was cancelled and R's CompleteTx committed, the claim of o took %v; want g's next job [%d] (g's marks: %v)",
			p.ID, ids(c), o.ID, marks)
	}
}
