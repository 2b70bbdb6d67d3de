package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testStatsCountEveryChange: after every kind of change, Stats equals a
// count of the jobs List shows, per queue and state; so does it after the
// store tidies (a PostgreSQL store folds its count deltas then). A
// rolled-back enqueue counts nothing.
func testStatsCountEveryChange(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	listed := func() map[string]int64 {
		out := map[string]int64{}
		for cursor := ""; ; {
			page, err := s.List(ctx, readpast.ListParams{Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range page.Jobs {
				out[j.Queue+"/"+string(j.State)]++
			}
			if cursor = page.Next; cursor == "" {
				return out
			}
		}
	}
	counted := func() map[string]int64 {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, x := range st {
			out[x.Queue+"/"+string(x.State)] += x.Count
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		want := listed()
		if got := counted(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: Stats = %v, the jobs listed say %v", step, got, want)
		}
		if td, ok := s.(readpast.Tidier); ok {
			if _, err := td.Tidy(ctx); err != nil {
				t.Fatal(err)
			}
			if got := counted(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s, tidied: Stats = %v, the jobs listed say %v", step, got, want)
			}
		}
	}
	var ps []readpast.EnqueueParams
	for i := range 30 {
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: fmt.Sprint("q", i%3), MaxAttempts: 1 + i%2, Group: []string{"", "G"}[i%2]})
	}
	jobs := enqueue(t, s, ps...)
	check("enqueue")
	tx := h.BeginSQLTx(t, s)
	if _, err := s.(readpast.SQLTxStore).EnqueueSQLTx(ctx, tx, ps[:5]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	check("a rolled-back enqueue")
	claimed := claim(t, s, 20, time.Minute, "q0", "q1", "q2")
	if len(claimed) < 10 {
		t.Fatalf("claimed %d jobs, want at least 10", len(claimed))
	}
	check("claim")
	if err := completeOne(ctx, s, claimed[0], ""); err != nil {
		t.Fatal(err)
	}
	var fails []readpast.Failure
	for _, j := range claimed[1:6] {
		fails = append(fails, readpast.Failure{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now()})
	}
	if _, err := s.Fail(ctx, fails); err != nil {
		t.Fatal(err)
	}
	check("complete and fail")
	if err := s.Release(ctx, claimed[6].ID, claimed[6].Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, claimed[7].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, jobs[28].ID); err != nil {
		t.Fatal(err)
	}
	check("release and cancel")
	if err := s.Snooze(ctx, claimed[8].ID, claimed[8].Token, time.Hour); err != nil {
		t.Fatal(err)
	}
	check("snooze")
	tx = h.BeginSQLTx(t, s)
	if err := s.(readpast.SQLTxStore).CompleteSQLTx(ctx, tx, readpast.Completion{ID: claimed[9].ID, Token: claimed[9].Token}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	check("a completion in the caller's transaction")
	if _, err := s.Retry(ctx, jobs[28].ID); err != nil {
		t.Fatal(err)
	}
	check("retry")
	short := claim(t, s, 30, 50*time.Millisecond, "q0", "q1", "q2")
	time.Sleep(100 * time.Millisecond)
	if n, err := s.RescueExpired(ctx, 100); err != nil || n != len(short) {
		t.Fatalf("rescued %d of %d expired claims: %v", n, len(short), err)
	}
	check("rescue")
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "q1"}, readpast.EnqueueParams{Kind: "k", Queue: "q1"}, readpast.EnqueueParams{Kind: "k", Queue: "q1"})
	if running := claim(t, s, 2, time.Minute, "q1"); len(running) != 2 {
		t.Fatalf("claimed %d jobs of q1, want 2", len(running))
	}
	if n, err := s.BulkCancel(ctx, readpast.JobFilter{Queue: "q1"}); err != nil || n == 0 {
		t.Fatalf("bulk cancel of q1: %d, %v", n, err)
	}
	check("bulk cancel, pending and running")
	if n, err := s.BulkRetry(ctx, readpast.JobFilter{Queue: "q1"}); err != nil || n == 0 {
		t.Fatalf("bulk retry of q1: %d, %v", n, err)
	}
	check("bulk retry")
	unique := readpast.EnqueueParams{Kind: "k", Queue: "q2", UniqueKey: "u"}
	enqueue(t, s, unique, readpast.EnqueueParams{Kind: "k", Queue: "q2"})
	enqueue(t, s, unique) // a duplicate: nothing inserted, nothing counted
	check("enqueue with a unique key")
	p := schedParams("counted", "@every 1s")
	p.Job.Queue = "q0"
	sc, _ := putSchedule(t, s, p)
	tick := *sc.NextRunAt
	next := tick.Add(time.Second)
	if fired, _, err := s.FireSchedule(ctx, readpast.Firing{Name: "counted", Version: sc.Version, Expect: tick, Tick: &tick, Next: &next}); err != nil || !fired {
		t.Fatalf("fire a schedule: %v, %v", fired, err)
	}
	check("a schedule's firing")
	if _, err := s.Prune(ctx, readpast.PruneParams{State: readpast.StateFailed, Before: time.Now().Add(time.Hour), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	check("prune")
}
