package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// expire waits out a lease and rescues it.
func expire(t *testing.T, s readpast.Store, lease time.Duration) {
	t.Helper()
	time.Sleep(lease + 20*time.Millisecond)
	ok(s.RescueExpired(ctxT(t), 1000)).must(t)
}

func testFencing(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	j := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	const lease = 150 * time.Millisecond
	a := claim(t, s, 1, lease)[0] // worker A
	expire(t, s, lease)
	b := claim(t, s, 1, time.Minute)[0] // worker B re-claims
	if b.ID != j.ID || b.Token == a.Token || b.Attempt != 2 {
		t.Fatalf("re-claim: %+v (A's token %s)", b, a.Token)
	}
	before := get(t, s, j.ID)
	// Every write with A's stale token changes nothing and says so.
	if err := completeOne(ctx, s, a, `{"by":"A"}`); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete with stale token: %v", err)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: a.ID, Token: a.Token, Message: "A"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("fail with stale token: %v", err)
	}
	if _, err := s.Extend(ctx, a.ID, a.Token, time.Hour); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("extend with stale token: %v", err)
	}
	if err := s.Release(ctx, a.ID, a.Token); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("release with stale token: %v", err)
	}
	if j, err := s.CancelClaimed(ctx, a.ID, a.Token); !errors.Is(err, readpast.ErrStaleToken) || j != nil {
		t.Fatalf("cancel with stale token: %+v, %v", j, err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: a.ID, Token: "not-a-token"}, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete with malformed token: %v", err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: 987654, Token: "not-a-token"}, ""); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("complete an unknown job with a malformed token: %v", err)
	}
	if err := failOne(ctx, s, readpast.Failure{ID: 987654, Token: "not-a-token"}); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("fail an unknown job with a malformed token: %v", err)
	}
	after := get(t, s, j.ID)
	if after.State != readpast.StateRunning || after.Token != b.Token || after.Attempt != before.Attempt ||
		!after.LeaseExpiresAt.Equal(*before.LeaseExpiresAt) || len(after.Errors) != len(before.Errors) {
		t.Fatalf("stale writes changed the job:\nbefore %+v\nafter  %+v", before, after)
	}
	// B's claim stands.
	if err := completeOne(ctx, s, b, `{"by":"B"}`); err != nil {
		t.Fatalf("complete with current token: %v", err)
	}
	done := wantState(t, s, j.ID, readpast.StateSucceeded)
	if string(done.Result) != `{"by": "B"}` && string(done.Result) != `{"by":"B"}` {
		t.Fatalf("result %s, want B's", done.Result)
	}
	if done.FinishedAt == nil || done.Worker == "" {
		t.Fatalf("finished job lacks finished_at or worker: %+v", done)
	}
	// A's token stays stale after the job finished; unknown ids are not found.
	if err := completeOne(ctx, s, a, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale complete after finish: %v", err)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: j.ID + 1000, Token: b.Token}, ""); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("complete unknown job: %v", err)
	}
	// One batch mixing current, stale and unknown entries.
	k := enqueue(t, s, readpast.EnqueueParams{Kind: "k"})[0]
	kc := claim(t, s, 1, time.Minute)[0]
	errs := ok(s.Complete(ctx, []readpast.Completion{{ID: a.ID, Token: a.Token}, {ID: k.ID, Token: kc.Token}, {ID: 999999, Token: kc.Token}})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil || !errors.Is(errs[2], readpast.ErrNotFound) {
		t.Fatalf("mixed batch: %v", errs)
	}
	wantState(t, s, k.ID, readpast.StateSucceeded)
}

func testCompleteIdempotent(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	enqueue(t, s, readpast.EnqueueParams{Kind: "k"})
	c := claim(t, s, 1, time.Minute)[0]
	if err := completeOne(ctx, s, c, `1`); err != nil {
		t.Fatal(err)
	}
	first := get(t, s, c.ID)
	// A retried completion (its response was lost) is accepted once more and
	// changes nothing.
	if err := completeOne(ctx, s, c, `2`); err != nil {
		t.Fatalf("repeated completion with the same token: %v", err)
	}
	again := get(t, s, c.ID)
	if string(again.Result) != string(first.Result) || !again.FinishedAt.Equal(*first.FinishedAt) {
		t.Fatalf("repeated completion changed the job: %+v -> %+v", first, again)
	}
	// But failing it now is stale.
	if err := failOne(ctx, s, readpast.Failure{ID: c.ID, Token: c.Token, Message: "late"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("fail after completion: %v", err)
	}
}

// testBatchRepeats: a batch that names a job twice, or carries one entry
// that cannot be stored, settles every entry as if applied one after
// another: each (id, token) pair acts once, a stale or malformed entry
// before the current one does not stand for it, and a group slot is freed
// once.
func testBatchRepeats(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	if err := s.SetGroupLimit(ctx, "R", 2); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s,
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
		readpast.EnqueueParams{Kind: "k", Group: "R", MaxAttempts: 5},
	)
	c := claim(t, s, 10, time.Minute)
	if len(c) != 2 {
		t.Fatalf("claimed %d of a group limited to 2", len(c))
	}
	a, b := c[0], c[1]
	// Fail a twice in one batch (retry later): one attempt ends, one slot frees.
	errs := ok(s.Fail(ctx, []readpast.Failure{
		{ID: a.ID, Token: a.Token, Message: "x\x00y \xff", RetryAt: time.Now().Add(time.Hour)},
		{ID: a.ID, Token: a.Token, Message: "again", RetryAt: time.Now().Add(time.Hour)},
	})).must(t)
	if errs[0] != nil || !errors.Is(errs[1], readpast.ErrStaleToken) {
		t.Fatalf("fail with a repeated entry: %v", errs)
	}
	if j := get(t, s, a.ID); len(j.Errors) != 1 || j.Errors[0].Message != "xy \uFFFD" {
		t.Fatalf("one error, cleaned of NUL and invalid UTF-8, want %q: %+v", "xy \uFFFD", j.Errors)
	}
	if more := claim(t, s, 10, time.Minute); len(more) != 1 {
		t.Fatalf("after one failure %d more jobs ran; the slot was freed %d times", len(more), len(more))
	} else {
		a = more[0]
	}
	// Complete a and b with repeats, a bad result and a stale token mixed
	// in. b's first entry cannot be stored, so its second entry, the first
	// storable one with b's token, completes it.
	errs = ok(s.Complete(ctx, []readpast.Completion{
		{ID: a.ID, Token: a.Token},
		{ID: b.ID, Token: b.Token, Result: json.RawMessage(`"nul \u0000"`)},
		{ID: a.ID, Token: a.Token},
		{ID: a.ID, Token: "00000000-0000-0000-0000-000000000000"},
		{ID: b.ID, Token: b.Token, Result: json.RawMessage(`"fine"`)},
	})).must(t)
	if errs[0] != nil || !errors.Is(errs[1], readpast.ErrInvalid) || errs[2] != nil ||
		!errors.Is(errs[3], readpast.ErrStaleToken) || errs[4] != nil {
		t.Fatalf("mixed completion batch: %v", errs)
	}
	wantState(t, s, a.ID, readpast.StateSucceeded)
	if j := wantState(t, s, b.ID, readpast.StateSucceeded); string(j.Result) != `"fine"` {
		t.Fatalf("b's result %s, want the storable entry's", j.Result)
	}
	// Exactly two slots came back: with three jobs waiting, two run.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "R"}, readpast.EnqueueParams{Kind: "k", Group: "R"})
	more := claim(t, s, 10, time.Minute)
	if len(more) != 2 {
		t.Fatalf("after two completions %d more jobs ran, want 2", len(more))
	}
	x, y := more[0], more[1]

	// A stale entry before the current one: the current one still acts.
	errs = ok(s.Complete(ctx, []readpast.Completion{
		{ID: x.ID, Token: "00000000-0000-0000-0000-000000000000"},
		{ID: x.ID, Token: x.Token, Result: json.RawMessage(`1`)},
		{ID: x.ID, Token: x.Token, Result: json.RawMessage(`2`)},
	})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil || errs[2] != nil {
		t.Fatalf("complete [stale, current, current again]: %v", errs)
	}
	if j := wantState(t, s, x.ID, readpast.StateSucceeded); string(j.Result) != `1` {
		t.Fatalf("result %s, want the first current entry's", j.Result)
	}
	// A malformed token before the current one: the failure is recorded.
	errs = ok(s.Fail(ctx, []readpast.Failure{
		{ID: y.ID, Token: "not-a-token", Message: "m"},
		{ID: y.ID, Token: y.Token, Message: "real", RetryAt: time.Now().Add(time.Hour)},
	})).must(t)
	if !errors.Is(errs[0], readpast.ErrStaleToken) || errs[1] != nil {
		t.Fatalf("fail [malformed, current]: %v", errs)
	}
	if j := wantState(t, s, y.ID, readpast.StatePending); len(j.Errors) != 1 || j.Errors[0].Message != "real" {
		t.Fatalf("after fail [malformed, current]: %+v", j.Errors)
	}
	// A retry time no JSON can hold is the entry's error, and changes
	// nothing: the job stays running under its claim.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "R"})
	z := claim(t, s, 1, time.Minute)
	if len(z) != 1 {
		t.Fatalf("claimed %d", len(z))
	}
	errs = ok(s.Fail(ctx, []readpast.Failure{
		{ID: z[0].ID, Token: z[0].Token, Message: "far", RetryAt: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{ID: z[0].ID, Token: z[0].Token, Message: "early", RetryAt: time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)},
	})).must(t)
	var fe *readpast.FieldError
	if !errors.As(errs[0], &fe) || fe.Field != "retry_at" || !errors.As(errs[1], &fe) || fe.Field != "retry_at" {
		t.Fatalf("fail with retry times outside 1970-9999: %v", errs)
	}
	if j := wantState(t, s, z[0].ID, readpast.StateRunning); len(j.Errors) != 0 {
		t.Fatalf("refused failures recorded errors: %+v", j.Errors)
	}
	// Unknown ids: not found, repeats too.
	errs = ok(s.Complete(ctx, []readpast.Completion{{ID: 1 << 40, Token: x.Token}, {ID: 1 << 40, Token: x.Token}})).must(t)
	if !errors.Is(errs[0], readpast.ErrNotFound) || !errors.Is(errs[1], readpast.ErrNotFound) {
		t.Fatalf("unknown id twice: %v", errs)
	}
}

// testSQLTx: an enqueue or a completion inside the caller's transaction
// stands if and only if the transaction commits, and a completion in a
// transaction is fenced like any other.
func testSQLTx(t *testing.T, h Harness) {
	if h.BeginSQLTx == nil {
		t.Fatal("Harness.BeginSQLTx is required: every store implements readpast.SQLTxStore")
	}
	s := newStore(t, h)
	ts, isTx := s.(readpast.SQLTxStore)
	if !isTx {
		t.Fatalf("%T does not implement readpast.SQLTxStore", s)
	}
	ctx := ctxT(t)

	tx := h.BeginSQLTx(t, s)
	rolled := ok(ts.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", Group: "g"}})).must(t)
	if _, err := ts.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: ""}}); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("a bad job in a transaction: %v, want a FieldError", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, rolled[0].ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("a job enqueued in a rolled-back transaction: %v", err)
	}

	tx = h.BeginSQLTx(t, s)
	kept := ok(ts.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", Group: "g"}})).must(t)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, 10, time.Minute)
	if len(c) != 1 || c[0].ID != kept[0].ID {
		t.Fatalf("claimed %v, want the committed job %d", ids(c), kept[0].ID)
	}
	j := c[0]

	tx = h.BeginSQLTx(t, s)
	if err := ts.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token, Result: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if g := wantState(t, s, j.ID, readpast.StateRunning); g.Token != j.Token {
		t.Fatalf("a rolled-back completion changed the claim: %+v", g)
	}
	tx = h.BeginSQLTx(t, s)
	if err := ts.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: "00000000-0000-0000-0000-000000000000"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("a stale completion in a transaction: %v", err)
	}
	var fe *readpast.FieldError
	if err := ts.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token, Result: json.RawMessage(`"\u0000"`)}); !errors.As(err, &fe) {
		t.Fatalf("a result that cannot be stored: %v", err)
	}
	if err := ts.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token, Result: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if g := wantState(t, s, j.ID, readpast.StateSucceeded); string(g.Result) != `2` {
		t.Fatalf("result %s after the committed completion", g.Result)
	}
	// The group's slot came back with the commit.
	next := enqueue(t, s, readpast.EnqueueParams{Kind: "k", Group: "g"})[0]
	if c := claim(t, s, 10, time.Minute); len(c) != 1 || c[0].ID != next.ID {
		t.Fatalf("after the committed completion claimed %v, want the group's next job", ids(c))
	}
}
