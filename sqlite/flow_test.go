package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// TestFlowDepth: a chain as deep as readpast.MaxFlowDepth allows, in one
// flow or built by id over many, is stored and cancelled whole from its
// top in one transaction, each job naming its parent; a job that would
// hang below its last is refused (*readpast.FieldError, ErrInvalid),
// counting the chain above the parent it names by id, and nothing of its
// flow is stored.
func TestFlowDepth(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.EnqueueFlow(ctx, chainFlow("deep", readpast.MaxFlowDepth+2)); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("a chain of %d in one flow: %v", readpast.MaxFlowDepth+2, err)
	}
	one, err := s.EnqueueFlow(ctx, chainFlow("deep", readpast.MaxFlowDepth+1))
	if err != nil {
		t.Fatal(err)
	}
	// The same depth, one job a call, each after the last by id.
	var byID []int64
	for i := range readpast.MaxFlowDepth + 1 {
		f := []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k", Queue: "deep"}}}
		if i > 0 {
			f[0].After = []readpast.After{{JobID: byID[i-1]}}
		}
		js, err := s.EnqueueFlow(ctx, f)
		if err != nil {
			t.Fatalf("job %d of the chain built by id: %v", i, err)
		}
		byID = append(byID, js[0].ID)
	}
	jobsBefore := countRows(t, s, "readpast_jobs")
	edgesBefore := countRows(t, s, "readpast_edges")
	for name, last := range map[string]int64{"one flow": one[len(one)-1].ID, "by id": byID[len(byID)-1]} {
		// Under the last job, with a shallow parent besides: the deeper
		// chain counts.
		_, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
			{Ref: "shallow", Job: readpast.EnqueueParams{Kind: "k", Queue: "deep"}},
			{Job: readpast.EnqueueParams{Kind: "k", Queue: "deep"}, After: []readpast.After{{Ref: "shallow"}, {JobID: last}}},
		})
		var fe *readpast.FieldError
		if !errors.Is(err, readpast.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "jobs[1].after" {
			t.Fatalf("%s: a job under the chain's last: %v", name, err)
		}
		// Under the job above the last: as deep as allowed.
		if _, err := s.EnqueueFlow(ctx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k", Queue: "side"},
			After: []readpast.After{{JobID: last - 1, Policy: readpast.RunAnyway}}}}); err != nil {
			t.Fatalf("%s: a job beside the chain's last: %v", name, err)
		}
	}
	if n := countRows(t, s, "readpast_jobs"); n != jobsBefore+2 {
		t.Fatalf("%d live jobs after the refused flows, want %d (the two beside the chains' last)", n, jobsBefore+2)
	}
	if n := countRows(t, s, "readpast_edges"); n != edgesBefore+2 {
		t.Fatalf("%d edges after the refused flows, want %d", n, edgesBefore+2)
	}
	for name, chain := range map[string][]int64{"one flow": jobIDs(one), "by id": byID} {
		if _, err := s.Cancel(ctx, chain[0]); err != nil {
			t.Fatal(err)
		}
		for i, id := range chain {
			j, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != readpast.StateCancelled {
				t.Fatalf("%s: job %d of the chain is %s, want cancelled", name, i, j.State)
			}
			if i > 0 && (j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Message != fmt.Sprintf("parent job %d was cancelled", chain[i-1])) {
				t.Fatalf("%s: job %d of the chain: errors %+v", name, i, j.Errors)
			}
		}
	}
	var open int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM readpast_edges WHERE state <> 'done'`).Scan(&open); err != nil || open != 0 {
		t.Fatalf("edges left unresolved: %d, %v", open, err)
	}
	// The jobs beside the chains' last ran after a cancelled parent
	// (run_anyway): released.
	c, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"side"}, Worker: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(c) != 2 {
		t.Fatalf("claimed %d beside the chains (%v), want 2", len(c), err)
	}
	checkCounts(t, s)
}

// TestFlowCancelCascade: one cancellation reaches, in one step, jobs
// below it by several paths and policies. x -> a -> b (cancel_child);
// m after x and a; r after a and b (run_anyway: released, its counter
// down by 2); h after b (hold_child: held until b is retried and
// succeeds); k after b and after y, a job outside (cancelled, naming b).
func TestFlowCancelCascade(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	js, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "x", Job: readpast.EnqueueParams{Kind: "x"}},
		{Ref: "y", Job: readpast.EnqueueParams{Kind: "y", Queue: "other"}},
		{Ref: "b", Job: readpast.EnqueueParams{Kind: "b"}, After: []readpast.After{{Ref: "a"}}}, // before its parent
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}, After: []readpast.After{{Ref: "x"}}},
		{Ref: "m", Job: readpast.EnqueueParams{Kind: "m"}, After: []readpast.After{{Ref: "a"}, {Ref: "x"}}},
		{Ref: "r", Job: readpast.EnqueueParams{Kind: "r", Queue: "released"},
			After: []readpast.After{{Ref: "a", Policy: readpast.RunAnyway}, {Ref: "b", Policy: readpast.RunAnyway}}},
		{Ref: "h", Job: readpast.EnqueueParams{Kind: "h", Queue: "held"}, After: []readpast.After{{Ref: "b", Policy: readpast.HoldChild}}},
		{Ref: "k", Job: readpast.EnqueueParams{Kind: "k"}, After: []readpast.After{{Ref: "y"}, {Ref: "b"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := map[string]int64{}
	for i, r := range []string{"x", "y", "b", "a", "m", "r", "h", "k"} {
		id[r] = js[i].ID
	}
	if _, err := s.Cancel(ctx, id["x"]); err != nil {
		t.Fatal(err)
	}
	for child, parent := range map[string]string{"a": "x", "b": "a", "m": "x", "k": "b"} {
		j, err := s.Get(ctx, id[child])
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("parent job %d was cancelled", id[parent])
		if j.State != readpast.StateCancelled || len(j.Errors) != 1 || j.Errors[0].Message != want {
			t.Fatalf("%s: %s %+v, want cancelled with %q", child, j.State, j.Errors, want)
		}
	}
	for r, want := range map[string]readpast.JobState{"y": readpast.StatePending, "r": readpast.StatePending, "h": readpast.StateBlocked} {
		if j, err := s.Get(ctx, id[r]); err != nil || j.State != want {
			t.Fatalf("%s: %v %v, want %s", r, j, err, want)
		}
	}
	edgeStates := func() string {
		t.Helper()
		rows, err := s.DB().QueryContext(ctx, `SELECT state, count(*) FROM readpast_edges GROUP BY 1 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var st string
			var n int
			if err := rows.Scan(&st, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s=%d", st, n))
		}
		return fmt.Sprint(out)
	}
	if got := edgeStates(); got != "[done=8 held=1]" {
		t.Fatalf("edges after the cancellation: %s", got)
	}
	checkCounts(t, s)
	c, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"released"}, Worker: "w", Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != id["r"] {
		t.Fatalf("claimed %v (%v), want r", c, err)
	}
	// b retried and succeeding releases h.
	if _, err := s.Retry(ctx, id["b"]); err != nil {
		t.Fatal(err)
	}
	b, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute})
	if err != nil || len(b) != 1 || b[0].ID != id["b"] {
		t.Fatalf("claimed %v (%v), want b", b, err)
	}
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: b[0].ID, Token: b[0].Token}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	if j, err := s.Get(ctx, id["h"]); err != nil || j.State != readpast.StatePending {
		t.Fatalf("h after b succeeded: %v %v", j, err)
	}
	if got := edgeStates(); got != "[done=9]" {
		t.Fatalf("edges after b succeeded: %s", got)
	}
	checkCounts(t, s)
}

// TestFlowInTheCallersTransaction: a flow stored in the caller's
// transaction exists only if it commits; committed, its child is released
// once its parent completes.
func TestFlowInTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	flow := []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "a"}},
		{Job: readpast.EnqueueParams{Kind: "b"}, After: []readpast.After{{Ref: "a"}}},
	}
	var _ readpast.FlowSQLTxStore = s
	if _, err := s.EnqueueFlowSQLTx(ctx, nil, flow); err == nil {
		t.Fatal("a nil transaction was accepted")
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.EnqueueFlowSQLTx(ctx, tx, flow)
	if err != nil || len(gone) != 2 || gone[1].State != readpast.StateBlocked {
		t.Fatalf("%v, %v", gone, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for _, j := range gone {
		if _, err := s.Get(ctx, j.ID); !errors.Is(err, readpast.ErrNotFound) {
			t.Fatalf("a rolled back flow's job %d: %v", j.ID, err)
		}
	}
	if n := countRows(t, s, "readpast_edges"); n != 0 {
		t.Fatalf("%d edges after the rollback", n)
	}
	checkCounts(t, s)

	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Bad input inside the transaction: an error, nothing done to it.
	if _, err := s.EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k"},
		After: []readpast.After{{Ref: "nobody"}}}}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("an edge to no job: %v", err)
	}
	kept, err := s.EnqueueFlowSQLTx(ctx, tx, flow)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Get(ctx, kept[1].ID); err != nil || j.State != readpast.StateBlocked {
		t.Fatalf("a committed flow's child: %v %v", j, err)
	}
	a, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(a) != 1 || a[0].ID != kept[0].ID {
		t.Fatalf("claimed %v (%v), want the parent alone", a, err)
	}
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: a[0].ID, Token: a[0].Token}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	b, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(b) != 1 || b[0].ID != kept[1].ID {
		t.Fatalf("claimed %v (%v) after the parent completed, want the child", b, err)
	}

	// A parent named by id, finished before the caller's flow: refused,
	// and the caller's transaction is still usable.
	tx, err = s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k"},
		After: []readpast.After{{JobID: kept[0].ID}}}}); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("a finished parent: %v", err)
	}
}

// countRows counts the rows of table.
func countRows(t *testing.T, s *sqlite.Store, table string) (n int) {
	t.Helper()
	if err := s.DB().QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// jobIDs lists the ids of js.
func jobIDs(js []*readpast.Job) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

// checkCounts compares the trigger-kept counts with the tables.
func checkCounts(t *testing.T, s *sqlite.Store) {
	t.Helper()
	var wrong int
	if err := s.DB().QueryRow(`SELECT count(*) FROM (
		SELECT queue, state, n FROM readpast_counts WHERE n <> 0
		EXCEPT SELECT queue, state, count(*) FROM (SELECT queue, state FROM readpast_jobs UNION ALL SELECT queue, state FROM readpast_history) GROUP BY 1, 2)`).Scan(&wrong); err != nil || wrong != 0 {
		t.Fatalf("counts: %d wrong, %v", wrong, err)
	}
	if err := s.DB().QueryRow(`SELECT count(*) FROM (
		SELECT queue, state, count(*) FROM (SELECT queue, state FROM readpast_jobs UNION ALL SELECT queue, state FROM readpast_history) GROUP BY 1, 2
		EXCEPT SELECT queue, state, n FROM readpast_counts)`).Scan(&wrong); err != nil || wrong != 0 {
		t.Fatalf("counts: %d missing, %v", wrong, err)
	}
}

// Deleting or pruning a child deletes its edges; the trigger-kept counts
// follow every flow transition.
func TestFlowEdgesGoWithJobs(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	js, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "p", Job: readpast.EnqueueParams{Kind: "k"}},
		{Job: readpast.EnqueueParams{Kind: "k"}, After: []readpast.After{{Ref: "p"}}},
		{Job: readpast.EnqueueParams{Kind: "k"}, After: []readpast.After{{Ref: "p", Policy: readpast.RunAnyway}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, s)
	edges := func() (n int) {
		t.Helper()
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM readpast_edges`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := edges(); n != 2 {
		t.Fatalf("%d edges, want 2", n)
	}
	if _, err := s.Cancel(ctx, js[0].ID); err != nil {
		t.Fatal(err)
	}
	checkCounts(t, s)
	if err := s.Delete(ctx, js[1].ID); err != nil {
		t.Fatal(err)
	}
	if n := edges(); n != 1 {
		t.Fatalf("%d edges after the cancelled child was deleted, want 1", n)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != js[2].ID {
		t.Fatalf("claimed %v, %v; want the run_anyway child", c, err)
	}
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: c[0].ID, Token: c[0].Token}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	// The cancelled parent and the run_anyway child, a flow, go together.
	if n, err := readpast.PruneOnce(ctx, s, readpast.Retention{Succeeded: time.Nanosecond, Failed: time.Nanosecond, Cancelled: time.Nanosecond}); err != nil || n != 2 {
		t.Fatal(n, err)
	}
	if n := edges(); n != 0 {
		t.Fatalf("%d edges after the last child was pruned, want 0", n)
	}
	checkCounts(t, s)
}

// Migration 13 rebuilds the live table: its rows, its triggers' counts and
// its id sequence (ids of jobs in history are never given again) stay.
func TestMigrateFlowsKeepsJobsAndIDs(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	path := s.Path()
	js, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a"}, {Kind: "b", Group: "G"}, {Kind: "c", Tags: []string{"t"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 3, Lease: time.Minute})
	if err != nil || len(c) != 3 {
		t.Fatal(c, err)
	}
	// The newest job finishes: the highest id lives only in history.
	if errs, err := s.Complete(ctx, []readpast.Completion{{ID: js[2].ID, Token: c[2].Token}}); err != nil || errs[0] != nil {
		t.Fatal(errs, err)
	}
	for _, q := range []string{
		`DROP TRIGGER readpast_jobs_released`,
		`DROP TRIGGER readpast_jobs_child_gone`,
		`DROP TRIGGER readpast_jobs_resolve_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN more_keys`, // schema 18, applied again
		`ALTER TABLE readpast_history DROP COLUMN more_keys`,
		`ALTER TABLE readpast_groups DROP COLUMN waiters`,
		`DROP TABLE readpast_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN has_children`,
		`ALTER TABLE readpast_jobs DROP COLUMN waiting_on`,
		`ALTER TABLE readpast_groups DROP COLUMN turn_used`, // schema 17, applied again
		`DELETE FROM readpast_schema_migrations WHERE version > 12`,
	} {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if cur, latest := schemaVersionOf(t, s2); cur != latest || latest < 13 {
		t.Fatalf("after Open: version %d of %d, want the latest, 13 or later", cur, latest)
	}
	checkCounts(t, s2)
	for i, j := range js[:2] {
		got, err := s2.Get(ctx, j.ID)
		if err != nil || got.State != readpast.StateRunning || got.Token != c[i].Token {
			t.Fatalf("job %d after the migration: %+v, %v", j.ID, got, err)
		}
	}
	more, err := s2.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "d"}})
	if err != nil || more[0].ID <= js[2].ID {
		t.Fatalf("a job enqueued after the migration got id %v (%v), want above %d", more, err, js[2].ID)
	}
	for _, c := range []struct{ kind, want string }{
		{"index", "[readpast_jobs_group_claim readpast_jobs_lease readpast_jobs_retrying readpast_jobs_ungrouped]"},
		{"trigger", "[readpast_jobs_attempt_insert readpast_jobs_attempt_update readpast_jobs_child_gone readpast_jobs_count_delete " +
			"readpast_jobs_count_insert readpast_jobs_count_update readpast_jobs_released readpast_jobs_resolve_edges]"},
	} {
		rows, err := s2.DB().Query(`SELECT name FROM sqlite_schema WHERE type = ?1 AND tbl_name = 'readpast_jobs'
			AND name NOT LIKE 'sqlite_%' ORDER BY name`, c.kind)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		rows.Close()
		if fmt.Sprint(names) != c.want {
			t.Fatalf("%ss on readpast_jobs after the migration: %v, want %s", c.kind, names, c.want)
		}
	}
}
