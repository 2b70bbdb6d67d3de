package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestAdvWakeFlowChildWorkerStartedAfterEnqueue: a flow's child with
// a run_at ahead is announced ("due:") only when the flow is enqueued
// (flowStored). A worker process whose listener starts after that reads
// due_upcoming.sql, which must list the child though it is still
// blocked. Its parent then succeeds before the child's run_at; the
// release wakes everyone at once (the child not yet due), and the worker
// must be woken again at the child's run_at.
func TestAdvWakeFlowChildWorkerStartedAfterEnqueue(t *testing.T) {
	for _, blocked := range []string{"flow child", "batch finisher"} {
		replay.Run(t, blocked, func(t *testing.T) {
			ctx := context.Background()
			u := pgtest.URL(t)
			a := pgharness.Open(t, u)
			t.Cleanup(func() { a.Close() })
			runAt := time.Now().Add(1500 * time.Millisecond)
			var childID int64
			var release func()
			if blocked == "flow child" {
				js, err := a.EnqueueFlow(ctx, []readpast.FlowJob{
					{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "parent"}},
					{Ref: "c", Job: readpast.EnqueueParams{Kind: "c", Queue: "child", RunAt: runAt}, After: []readpast.After{{Ref: "p"}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				childID = js[1].ID
				release = func() {
					p := aw2pgClaim(t, a, "parent", 1)
					if len(p) != 1 {
						t.Fatal("parent not claimed")
					}
					advComplete(t, a, p[0])
				}
			} else {
				f, err := a.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "f", Queue: "child", RunAt: runAt}})
				if err != nil {
					t.Fatal(err)
				}
				childID = f.ID
				release = func() {
					if _, err := a.SealBatch(ctx, f.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(50 * time.Millisecond) // the enqueue's "due:" NOTIFY has gone
			w := pgharness.Open(t, u)
			t.Cleanup(func() { w.Close() })
			ch := aw2pgWorker(t, a, w, 1)
			time.Sleep(100 * time.Millisecond) // its due_upcoming read is over
			replay.Drain(ch)
			release()
			c, err := a.Get(ctx, childID)
			if err != nil || c.State != readpast.StatePending {
				t.Fatalf("%s: %v %v", blocked, c, err)
			}
			if !time.Now().Before(runAt) {
				t.Skip("released after its run_at: no window")
			}
			replay.Delivered(t, w, ch, "child", childID, c.RunAt, "a "+blocked+" released before its run_at, worker started after the enqueue")
		})
	}
}
