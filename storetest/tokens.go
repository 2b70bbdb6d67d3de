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
}
