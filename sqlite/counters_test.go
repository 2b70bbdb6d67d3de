package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// groupRunning reads a group's running count straight from the table; ok is
// false when the group has no row (nothing running, default limit).
func groupRunning(t *testing.T, s *sqlite.Store, group string) (n int, ok bool) {
	t.Helper()
	err := s.DB().QueryRow(`SELECT running FROM readpast_groups WHERE group_key = ?`, group).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

// claimGroup enqueues n jobs of group G (limit n) and claims them all.
func claimGroup(t *testing.T, s *sqlite.Store, n int) []*readpast.Job {
	t.Helper()
	ctx := context.Background()
	if err := s.SetGroupLimit(ctx, "G", n); err != nil {
		t.Fatal(err)
	}
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Group: "G"}
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: n, Lease: time.Minute})
	if err != nil || len(jobs) != n {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	if got, _ := groupRunning(t, s, "G"); got != n {
		t.Fatalf("running = %d after claiming %d", got, n)
	}
	return jobs
}

func wantResults(t *testing.T, what string, got []error, want ...error) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d results %v, want %d", what, len(got), got, len(want))
	}
	for i := range want {
		if !errors.Is(got[i], want[i]) || (want[i] == nil) != (got[i] == nil) {
			t.Fatalf("%s: entry %d = %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// Repeated ids in one Complete batch act once: the same token again gets
// nil, another token ErrStaleToken, and the group count drops by one.
func TestCompleteRepeatedIDDecrementsOnce(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	jobs := claimGroup(t, s, 2)
	a := jobs[0]
	res, err := s.Complete(ctx, []readpast.Completion{
		{ID: a.ID, Token: a.Token, Result: json.RawMessage(`1`)},
		{ID: a.ID, Token: a.Token, Result: json.RawMessage(`2`)},
		{ID: a.ID, Token: "other"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, "complete", res, nil, nil, readpast.ErrStaleToken)
	if got, _ := groupRunning(t, s, "G"); got != 1 {
		t.Fatalf("running = %d after completing one of 2 jobs, want 1", got)
	}
	if j, _ := s.Get(ctx, a.ID); j.State != readpast.StateSucceeded || string(j.Result) != `1` {
		t.Fatalf("job: %s %s, want succeeded with the first entry's result", j.State, j.Result)
	}

	// A stale first entry does not stand for the current one after it.
	b := jobs[1]
	res, err = s.Complete(ctx, []readpast.Completion{{ID: b.ID, Token: "other"}, {ID: b.ID, Token: b.Token}})
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, "complete stale first", res, readpast.ErrStaleToken, nil)
	if j, _ := s.Get(ctx, b.ID); j.State != readpast.StateSucceeded {
		t.Fatalf("job %s, want succeeded", j.State)
	}
	if got, _ := groupRunning(t, s, "G"); got != 0 {
		t.Fatalf("running = %d, want 0", got)
	}
}

// Repeated ids in one Fail batch act once: a later entry for the id is
// ErrStaleToken (the first one ended the claim), and the group count drops
// by one.
func TestFailRepeatedIDDecrementsOnce(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	jobs := claimGroup(t, s, 3)
	a, b, c := jobs[0], jobs[1], jobs[2]
	res, err := s.Fail(ctx, []readpast.Failure{
		{ID: a.ID, Token: a.Token, Message: "first"},
		{ID: a.ID, Token: a.Token, Message: "again"},
		{ID: a.ID, Token: "other", Message: "other"},
		{ID: b.ID, Token: b.Token, Message: "b", Discard: true},
		{ID: b.ID, Token: b.Token, Message: "b again", Discard: true},
		{ID: 1 << 40, Token: "x"},
		{ID: 1 << 40, Token: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, "fail", res, nil, readpast.ErrStaleToken, readpast.ErrStaleToken,
		nil, readpast.ErrStaleToken, readpast.ErrNotFound, readpast.ErrNotFound)
	if got, _ := groupRunning(t, s, "G"); got != 1 {
		t.Fatalf("running = %d after failing 2 of 3 jobs, want 1", got)
	}
	ja, _ := s.Get(ctx, a.ID)
	if ja.State != readpast.StatePending || len(ja.Errors) != 1 || ja.Errors[0].Message != "first" {
		t.Fatalf("a: %s %+v, want pending with one error", ja.State, ja.Errors)
	}
	if jb, _ := s.Get(ctx, b.ID); jb.State != readpast.StateFailed || len(jb.Errors) != 1 {
		t.Fatalf("b: %s %+v, want failed with one error", jb.State, jb.Errors)
	}

	// A stale first entry does not stand for the current one after it.
	res, err = s.Fail(ctx, []readpast.Failure{{ID: c.ID, Token: "other"}, {ID: c.ID, Token: c.Token, Message: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	wantResults(t, "fail stale first", res, readpast.ErrStaleToken, nil)
	if j, _ := s.Get(ctx, c.ID); j.State != readpast.StatePending || len(j.Errors) != 1 || j.Errors[0].Message != "c" {
		t.Fatalf("c: %s %+v, want pending with the current entry's error", j.State, j.Errors)
	}
	if got, _ := groupRunning(t, s, "G"); got != 0 {
		t.Fatalf("running = %d, want 0", got)
	}
}

// A group count that drifted below the jobs running is an error that rolls
// the whole write back, not something clamped to 0.
func TestGroupCounterDriftIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name, drift string
		finish      func(s *sqlite.Store, j *readpast.Job) error
	}{
		{"complete, count 0", `UPDATE readpast_groups SET running = 0`, func(s *sqlite.Store, j *readpast.Job) error {
			_, err := s.Complete(context.Background(), []readpast.Completion{{ID: j.ID, Token: j.Token}})
			return err
		}},
		{"fail, count 0", `UPDATE readpast_groups SET running = 0`, func(s *sqlite.Store, j *readpast.Job) error {
			_, err := s.Fail(context.Background(), []readpast.Failure{{ID: j.ID, Token: j.Token}})
			return err
		}},
		{"release, no row", `DELETE FROM readpast_groups`, func(s *sqlite.Store, j *readpast.Job) error {
			return s.Release(context.Background(), j.ID, j.Token)
		}},
		{"cancel, no row", `DELETE FROM readpast_groups`, func(s *sqlite.Store, j *readpast.Job) error {
			_, err := s.Cancel(context.Background(), j.ID)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t)
			j := claimGroup(t, s, 1)[0]
			if _, err := s.DB().Exec(tc.drift); err != nil {
				t.Fatal(err)
			}
			err := tc.finish(s, j)
			if err == nil || isEntryOutcome(err) {
				t.Fatalf("write with a drifted group count: %v, want a failure", err)
			}
			if got, _ := s.Get(context.Background(), j.ID); got.State != readpast.StateRunning {
				t.Fatalf("job %s after the failed write, want running (rolled back)", got.State)
			}
		})
	}
}

func isEntryOutcome(err error) bool {
	return errors.Is(err, readpast.ErrStaleToken) || errors.Is(err, readpast.ErrNotFound) || errors.Is(err, readpast.ErrInvalid)
}

// Release takes one off the attempt; an attempt that drifted to 0 while
// running fails the write instead of being clamped.
func TestReleaseAttemptDriftIsAnError(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if _, err := s.DB().Exec(`UPDATE readpast_jobs SET attempt = 0`); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, c[0].ID, c[0].Token); err == nil || isEntryOutcome(err) {
		t.Fatalf("release with attempt 0: %v, want a failure", err)
	}
	if j, _ := s.Get(ctx, c[0].ID); j.State != readpast.StateRunning || j.Attempt != 0 {
		t.Fatalf("job %s attempt %d, want running attempt 0 (rolled back)", j.State, j.Attempt)
	}
}

// A result CheckResult rejects fails that entry only, and changes nothing;
// the rest of the batch completes, including a later entry for the same
// job whose result can be stored, as on PostgreSQL.
func TestCompleteBadResultIsPerEntry(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "k"}, {Kind: "k"}, {Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 4, Lease: time.Minute})
	if err != nil || len(c) != 4 {
		t.Fatal(c, err)
	}
	res, err := s.Complete(ctx, []readpast.Completion{
		{ID: c[0].ID, Token: c[0].Token, Result: json.RawMessage(`{not json`)},
		{ID: c[1].ID, Token: c[1].Token, Result: json.RawMessage(`{"ok":true}`)},
		{ID: c[2].ID, Token: c[2].Token, Result: json.RawMessage(`"a\u0000b"`)},
		// A repeat after a rejected entry for the same job acts.
		{ID: c[0].ID, Token: c[0].Token, Result: json.RawMessage(`2`)},
	})
	if err != nil {
		t.Fatalf("batch with bad results: %v", err)
	}
	for _, i := range []int{0, 2} {
		var fe *readpast.FieldError
		if !errors.As(res[i], &fe) || fe.Field != "result" {
			t.Fatalf("entry %d: %v, want a FieldError for result", i, res[i])
		}
	}
	if res[1] != nil || res[3] != nil {
		t.Fatalf("entries 1 and 3: %v, want nil", res)
	}
	for i, want := range []readpast.JobState{readpast.StateSucceeded, readpast.StateSucceeded, readpast.StateRunning} {
		if j, _ := s.Get(ctx, c[i].ID); j.State != want {
			t.Fatalf("job %d: %s, want %s", i, j.State, want)
		}
	}

	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var fe *readpast.FieldError
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[2].ID, Token: c[2].Token, Result: json.RawMessage(`"\u0000"`)}); !errors.As(err, &fe) || fe.Field != "result" {
		t.Fatalf("CompleteTx with a bad result: %v, want a FieldError", err)
	}
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[2].ID, Token: c[2].Token, Result: json.RawMessage(`3`)}); err != nil {
		t.Fatal(err)
	}
}

// Fail stores messages and stacks as Failure.Normalize makes them.
func TestFailNormalizesMessage(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	f := readpast.Failure{ID: c[0].ID, Token: c[0].Token,
		Message: "bad\x00\xffbyte" + strings.Repeat("é", readpast.MaxErrorMessage),
		Stack:   strings.Repeat("s\x00", readpast.MaxErrorStack)}
	res, err := s.Fail(ctx, []readpast.Failure{f})
	if err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	j, err := s.Get(ctx, c[0].ID)
	if err != nil || len(j.Errors) != 1 {
		t.Fatal(j, err)
	}
	got, want := j.Errors[0], f.Normalize()
	if got.Message != want.Message || got.Stack != want.Stack {
		t.Fatalf("stored message/stack differ from Failure.Normalize (%d/%d bytes, want %d/%d)",
			len(got.Message), len(got.Stack), len(want.Message), len(want.Stack))
	}
	if !utf8.ValidString(got.Message) || strings.ContainsRune(got.Message+got.Stack, 0) {
		t.Fatal("stored message is not clean UTF-8")
	}
}

func TestRescueExpiredLimit(t *testing.T) {
	s := openTemp(t)
	for _, limit := range []int{0, -1} {
		n, err := s.RescueExpired(context.Background(), limit)
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || fe.Field != "limit" || n != 0 {
			t.Fatalf("RescueExpired(%d) = %d, %v; want a FieldError for limit", limit, n, err)
		}
	}
	if n, err := s.RescueExpired(context.Background(), 1); err != nil || n != 0 {
		t.Fatalf("RescueExpired(1) = %d, %v", n, err)
	}
}

func TestEmptyInputs(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if jobs, err := s.Enqueue(ctx, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("Enqueue(nil) = %v, %v", jobs, err)
	}
	if res, err := s.Complete(ctx, []readpast.Completion{}); err != nil || len(res) != 0 {
		t.Fatalf("Complete(empty) = %v, %v", res, err)
	}
	if res, err := s.Fail(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("Fail(nil) = %v, %v", res, err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st == nil || len(st) != 0 {
		t.Fatalf("Stats on an empty database = %#v, %v", st, err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if jobs, err := s.EnqueueSQLTx(ctx, tx, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("EnqueueTx(nil) = %v, %v", jobs, err)
	}
}

// Stats lists queues in order, each queue's states in lifecycle order.
func TestStatsOrder(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	var ps []readpast.EnqueueParams
	for _, q := range []string{"z", "a", "m"} {
		for range 5 {
			ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: q})
		}
	}
	if _, err := s.Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"z", "a", "m"} {
		// A job blocked behind a parent in another queue.
		if _, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
			{Ref: "p", Job: readpast.EnqueueParams{Kind: "k", Queue: "parents"}},
			{Job: readpast.EnqueueParams{Kind: "k", Queue: q}, After: []readpast.After{{Ref: "p"}}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"z", "a", "m"} {
		c, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{q}, Worker: "w", Limit: 4, Lease: time.Minute})
		if err != nil || len(c) != 4 {
			t.Fatal(c, err)
		}
		// Finish in reverse lifecycle order: cancelled, failed, succeeded.
		if _, err := s.Cancel(ctx, c[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Fail(ctx, []readpast.Failure{{ID: c[1].ID, Token: c[1].Token, Discard: true}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, []readpast.Completion{{ID: c[2].ID, Token: c[2].Token}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range st {
		if r.Queue == "parents" {
			continue
		}
		got = append(got, fmt.Sprintf("%s/%s/%d", r.Queue, r.State, r.Count))
	}
	var want []string
	for _, q := range []string{"a", "m", "z"} {
		for _, s := range readpast.AllStates {
			want = append(want, fmt.Sprintf("%s/%s/%d", q, s, 1))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats %v\nwant  %v", got, want)
	}
}

// A database at schema version 1 (no attempt check, no ready marks) with
// jobs in it gets migrations 2 and 3 on Open: counters recounted, and its
// pending grouped job marked, so it is claimed.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	path := s.Path()
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "g", Group: "G"}}); err != nil {
		t.Fatal(err)
	}
	if held, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute}); err != nil || len(held) != 1 {
		t.Fatal(held, err)
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}, {Kind: "g", Group: "H"}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TRIGGER readpast_jobs_released`, // schema 13, applied again
		`DROP TRIGGER readpast_jobs_child_gone`,
		`DROP TRIGGER readpast_jobs_resolve_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN more_keys`, // schema 18, applied again
		`ALTER TABLE readpast_history DROP COLUMN more_keys`,
		`ALTER TABLE readpast_groups DROP COLUMN waiters`,
		`DROP TABLE readpast_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN has_children`,
		`ALTER TABLE readpast_jobs DROP COLUMN waiting_on`,
		`ALTER TABLE readpast_jobs DROP COLUMN traceparent`,
		`ALTER TABLE readpast_jobs DROP COLUMN tracestate`,
		`ALTER TABLE readpast_groups DROP COLUMN turn_used`, // schema 17, applied again
		`ALTER TABLE readpast_groups DROP COLUMN weight`,
		`ALTER TABLE readpast_groups DROP COLUMN served_at`,
		`DROP TABLE readpast_limits`,
		`DROP INDEX readpast_groups_limit`,
		`ALTER TABLE readpast_groups DROP COLUMN limit_key`,
		`ALTER TABLE readpast_groups DROP COLUMN interval_us`,
		`ALTER TABLE readpast_groups DROP COLUMN burst`,
		`ALTER TABLE readpast_groups DROP COLUMN tat`,
		`DROP TABLE readpast_job_tags`,
		`ALTER TABLE readpast_jobs DROP COLUMN tags`,
		`ALTER TABLE readpast_jobs DROP COLUMN snoozes`,
		`ALTER TABLE readpast_history DROP COLUMN tags`,
		`ALTER TABLE readpast_history DROP COLUMN snoozes`,
		`DROP TABLE readpast_unique_keys`,
		`DROP TABLE readpast_schedules`,
		`DROP TABLE readpast_schedule_runs`,
		`ALTER TABLE readpast_jobs DROP COLUMN unique_key`,
		`ALTER TABLE readpast_jobs DROP COLUMN unique_until`,
		`ALTER TABLE readpast_history DROP COLUMN unique_key`,
		`ALTER TABLE readpast_history DROP COLUMN unique_until`,
		`DROP TRIGGER readpast_jobs_attempt_insert`,
		`DROP TRIGGER readpast_jobs_attempt_update`,
		`DROP TABLE readpast_group_ready`,
		`DROP TABLE readpast_queues`,
		`DROP TABLE readpast_counts`,
		`DROP TRIGGER readpast_jobs_count_insert`,
		`DROP TRIGGER readpast_jobs_count_delete`,
		`DROP TRIGGER readpast_jobs_count_update`,
		`DROP TRIGGER readpast_history_count_insert`,
		`DROP TRIGGER readpast_history_count_delete`,
		`DROP TRIGGER readpast_history_count_update`,
		`DROP INDEX readpast_jobs_ungrouped`,
		`CREATE INDEX readpast_jobs_claim ON readpast_jobs (queue, priority, run_at, id, group_key) WHERE state = 'pending'`,
		`DELETE FROM readpast_schema_migrations WHERE version > 1`,
		`UPDATE readpast_groups SET running = 5 WHERE group_key = 'G'`, // drifted under version 1
	} {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if cur, _ := schemaVersionOf(t, s); cur != 1 {
		t.Fatalf("version %d, want 1", cur)
	}
	s.Close()
	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if cur, latest := schemaVersionOf(t, s2); cur != latest || latest < 2 {
		t.Fatalf("after Open: version %d of %d", cur, latest)
	}
	var wrong int
	if err := s2.DB().QueryRow(`SELECT count(*) FROM (
		SELECT queue, state, count(*) AS n FROM readpast_jobs GROUP BY 1, 2
		EXCEPT SELECT queue, state, n FROM readpast_counts)`).Scan(&wrong); err != nil || wrong != 0 {
		t.Fatalf("counts after migration 5: %d wrong, %v", wrong, err)
	}
	var running int
	if err := s2.DB().QueryRow(`SELECT running FROM readpast_groups WHERE group_key = 'G'`).Scan(&running); err != nil || running != 1 {
		t.Fatalf("group counter after migration 2: %d %v, want recounted to 1", running, err)
	}
	c, err := s2.Claim(ctx, readpast.ClaimParams{Worker: "w", Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	if _, err := s2.DB().Exec(`UPDATE readpast_jobs SET attempt = -1`); err == nil {
		t.Fatal("attempt -1 stored after migration 2")
	}
}
