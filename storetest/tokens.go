package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// testTokenSpellings: a claim token is a UUID, and every store takes it
// in any spelling of that UUID (upper case, braces, a urn:uuid: prefix,
// no hyphens) for every fenced write, a repeat included; an upper-case
// copy of another claim's token is as stale as the token itself. (The
// jobs of one claim share its token.)
func testTokenSpellings(t *testing.T, h Harness) {
	s := newStore(t, h)
	ctx := ctxT(t)
	spell := map[string]func(string) string{
		"upper":    strings.ToUpper,
		"braces":   func(tok string) string { return "{" + tok + "}" },
		"urn":      func(tok string) string { return "urn:uuid:" + tok },
		"unbroken": func(tok string) string { return strings.ReplaceAll(tok, "-", "") },
	}
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "ts"}, readpast.EnqueueParams{Kind: "k", Queue: "ts"},
		readpast.EnqueueParams{Kind: "k", Queue: "ts"}, readpast.EnqueueParams{Kind: "k", Queue: "ts"},
		readpast.EnqueueParams{Kind: "k", Queue: "ts"}, readpast.EnqueueParams{Kind: "k", Queue: "ts", MaxAttempts: 1})
	js := claim(t, s, 6, time.Minute, "ts")
	if len(js) != 6 {
		t.Fatalf("claimed %d jobs, want 6", len(js))
	}
	ext, done, fail, rel, snz, can := js[0], js[1], js[2], js[3], js[4], js[5]

	// Another claim's token, spelled otherwise, is stale.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "ts"})
	other := claim(t, s, 1, time.Minute, "ts")[0]
	if err := completeOne(ctx, s, &readpast.Job{ID: done.ID, Token: spell["upper"](other.Token)}, ""); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("complete with another claim's token in upper case: %v, want ErrStaleToken", err)
	}
	if _, err := s.Extend(ctx, ext.ID, spell["upper"](ext.Token), time.Hour); err != nil {
		t.Fatalf("extend, the token in upper case: %v", err)
	}
	if j := get(t, s, ext.ID); j.LeaseExpiresAt == nil || time.Until(*j.LeaseExpiresAt) < 30*time.Minute {
		t.Fatalf("extend, the token in upper case: lease ends %v", j.LeaseExpiresAt)
	}
	if err := completeOne(ctx, s, &readpast.Job{ID: done.ID, Token: spell["braces"](done.Token)}, `"ok"`); err != nil {
		t.Fatalf("complete, the token in braces: %v", err)
	}
	// A repeat, in a third spelling and in a batch with a fourth.
	errs, err := s.Complete(ctx, []readpast.Completion{{ID: done.ID, Token: spell["urn"](done.Token)}, {ID: done.ID, Token: spell["unbroken"](done.Token)}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("complete repeated in other spellings: %v, %v", errs, err)
	}
	wantState(t, s, done.ID, readpast.StateSucceeded)
	if err := failOne(ctx, s, readpast.Failure{ID: fail.ID, Token: spell["unbroken"](fail.Token), Message: "m"}); err != nil {
		t.Fatalf("fail, the token without hyphens: %v", err)
	}
	if j := get(t, s, fail.ID); j.State == readpast.StateRunning || len(j.Errors) != 1 {
		t.Fatalf("fail, the token without hyphens: %s, %d errors", j.State, len(j.Errors))
	}
	if err := s.Release(ctx, rel.ID, spell["urn"](rel.Token)); err != nil {
		t.Fatalf("release, the token with urn:uuid: %v", err)
	}
	wantState(t, s, rel.ID, readpast.StatePending)
	if err := s.Snooze(ctx, snz.ID, spell["upper"](snz.Token), time.Hour); err != nil {
		t.Fatalf("snooze, the token in upper case: %v", err)
	}
	wantState(t, s, snz.ID, readpast.StatePending)
	if j, err := s.CancelClaimed(ctx, can.ID, spell["upper"](can.Token)); err != nil || j.State != readpast.StateCancelled {
		t.Fatalf("cancel, the token in upper case: %+v, %v", j, err)
	}
	if j, err := s.CancelClaimed(ctx, can.ID, spell["braces"](can.Token)); err != nil || j.State != readpast.StateCancelled {
		t.Fatalf("cancel repeated, the token in braces: %+v, %v", j, err)
	}
	wantState(t, s, ext.ID, readpast.StateRunning)

	// A batch that names one running job twice, in two spellings of its
	// token, settles as one naming it twice in one: the first entry acts,
	// the second is its repeat. A job with a key frees its slot once.
	enqueue(t, s, readpast.EnqueueParams{Kind: "k", Queue: "tb"}, readpast.EnqueueParams{Kind: "k", Queue: "tb", Group: "tb-g"},
		readpast.EnqueueParams{Kind: "k", Queue: "tb", Group: "tb-g"})
	two := claim(t, s, 3, time.Minute, "tb")
	if len(two) != 2 {
		t.Fatalf("claimed %d jobs, want 2 (the key runs one at a time)", len(two))
	}
	c, f := two[0], two[1]
	errs, err = s.Complete(ctx, []readpast.Completion{{ID: c.ID, Token: c.Token}, {ID: c.ID, Token: spell["upper"](c.Token)}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("complete, one running job in two spellings: %v, %v; want nil, nil", errs, err)
	}
	wantState(t, s, c.ID, readpast.StateSucceeded)
	errs, err = s.Fail(ctx, []readpast.Failure{{ID: f.ID, Token: spell["braces"](f.Token), Message: "a"}, {ID: f.ID, Token: f.Token, Message: "b"}})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], readpast.ErrStaleToken) {
		t.Fatalf("fail, one running job in two spellings: %v, %v; want nil, ErrStaleToken (as one spelling twice)", errs, err)
	}
	if j := get(t, s, f.ID); j.State != readpast.StatePending || len(j.Errors) != 1 || j.Errors[0].Message != "a" {
		t.Fatalf("fail, one running job in two spellings: %s with errors %+v; want pending, one error \"a\"", j.State, j.Errors)
	}
	if next := claim(t, s, 3, time.Minute, "tb"); len(next) != 1 || next[0].ID == f.ID {
		t.Fatalf("after the failure the key's claim took %v, want its next job (the failed one waits for its retry)", ids(next))
	}
}
