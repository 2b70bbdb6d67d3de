package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/readpast/readpast"
)

// testBrowserLimits: the limits page shows each declared limit and the
// keys it governs, with their running jobs, tokens and next start; its
// form declares a template whose key needs escaping, keeps what was typed
// when the input is refused, edits the limit from its Edit link and
// deletes it with its Delete button, with the store read after each.
func testBrowserLimits(b *browser, st testStore) {
	ctx := context.Background()
	if _, err := st.PutLimit(ctx, readpast.Limit{Key: "partner:*", Concurrency: 3, Rate: 30, Per: time.Hour, Burst: 2}); err != nil {
		b.t.Fatal(err)
	}
	if g, err := st.TakeTokens(ctx, "partner:acme", 2); err != nil || !g.Granted {
		b.t.Fatalf("TakeTokens: %+v %v", g, err)
	}
	b.nav("/")
	b.click("nav a[href='/limits']")
	b.waitVisible("table.keys")
	b.wantText("#limit-partner\\:\\*", "3 at once · 30 per 1 h, bursts of 2")
	row := "#key-partner\\:acme"
	b.wantText(row+" td.running", "0 of 3")
	b.wantText(row+" td.tokens", "0")
	b.wantText(row+" td.next", "(in ")
	b.checkLabels()
	b.shot("limits")

	const key = "tenant/eu:*"
	section := fmt.Sprintf("[id='limit-%s']", key)
	stored := func() *readpast.Limit {
		b.t.Helper()
		li, err := st.GetLimit(ctx, key)
		if errors.Is(err, readpast.ErrLimitNotFound) {
			return nil
		}
		if err != nil {
			b.t.Fatal(err)
		}
		return &li.Limit
	}
	// Declare it.
	fillLimitForm(b, map[string]string{"key": key, "concurrency": "2", "rate": "5", "per": "1m"})
	b.submit("#limit-save", http.StatusOK)
	b.wantText(".flash", "Limit tenant/eu:* created: 2 at once · 5 per 1 min, bursts of 5.")
	b.wantText(section, "2 at once · 5 per 1 min, bursts of 5")
	want := readpast.Limit{Key: key, Concurrency: 2, Rate: 5, Per: time.Minute, Burst: 5, Weight: 1}
	if got := stored(); got == nil || *got != want {
		b.t.Fatalf("after the set the store holds %+v, want %+v", got, want)
	}
	b.shot("limit-created")

	// Input the limit's rules refuse comes back as typed, with the problem.
	typed := map[string]string{"key": key, "concurrency": "7", "rate": "fast", "per": "1h", "burst": "3", "weight": "2"}
	fillLimitForm(b, typed)
	b.submit("#limit-save", http.StatusBadRequest)
	b.wantText("#limit-form #limit-problem", "The rate is not valid: must be a whole number.")
	wantLimitForm(b, typed)
	if got := b.eval(`document.getElementById('l-rate').getAttribute('aria-invalid')`); got != "true" {
		b.t.Errorf("the refused rate is not marked invalid: %q", got)
	}
	if got := stored(); got == nil || *got != want {
		b.t.Fatalf("after the refused input the store holds %+v, want %+v", got, want)
	}
	b.checkLabels()
	b.shot("limit-refused")

	// Edit it: the form comes filled with it as stored.
	b.nav("/limits")
	b.click(fmt.Sprintf("a[aria-label='Edit limit %s']", key))
	b.wantText("#limit-form-title", "Edit the limit tenant/eu:*")
	wantLimitForm(b, map[string]string{"key": key, "concurrency": "2", "rate": "5", "per": "1m", "burst": "5", "weight": "1"})
	fillLimitForm(b, map[string]string{"concurrency": "4", "burst": "2", "weight": "3"})
	b.submit("#limit-save", http.StatusOK)
	b.wantText(".flash", "Limit tenant/eu:* replaced: 4 at once · 5 per 1 min, bursts of 2 · weight 3.")
	b.wantText(section, "4 at once · 5 per 1 min, bursts of 2 · weight 3")
	want = readpast.Limit{Key: key, Concurrency: 4, Rate: 5, Per: time.Minute, Burst: 2, Weight: 3}
	if got := stored(); got == nil || *got != want {
		b.t.Fatalf("after the edit the store holds %+v, want %+v", got, want)
	}

	// Delete it.
	b.submit(fmt.Sprintf("button[aria-label='Delete limit %s']", key), http.StatusOK)
	b.wantText(".flash", "Limit tenant/eu:* deleted")
	if n := b.evalInt(fmt.Sprintf(`document.querySelectorAll(%q).length`, section)); n != 0 {
		b.t.Error("the deleted limit is still listed")
	}
	if got := stored(); got != nil {
		b.t.Fatalf("after the delete the store holds %+v", got)
	}
	if _, err := st.GetLimit(ctx, "partner:*"); err != nil {
		b.t.Fatalf("the delete reached another limit: %v", err)
	}
	b.noOverflow()
	b.shot("limit-deleted")
	// At a phone's width the form and the limits fit.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	b.nav("/limits?edit=partner%3A%2A")
	b.wantText("#limit-form-title", "Edit the limit partner:*")
	b.noOverflow()
	b.shot("limit-edit-phone")
	b.do(chromedp.ResetViewport())
}

// fillLimitForm replaces the values of the limit form's fields by
// typing them.
func fillLimitForm(b *browser, fields map[string]string) {
	b.t.Helper()
	for name, v := range fields {
		sel := chromedp.CSS("#l-" + name)
		b.do(chromedp.Clear(sel), chromedp.SendKeys(sel, v))
	}
}

// wantLimitForm fails unless the limit form's fields hold want.
func wantLimitForm(b *browser, want map[string]string) {
	b.t.Helper()
	for name, v := range want {
		js, _ := json.Marshal("l-" + name)
		if got := b.eval(fmt.Sprintf(`document.getElementById(%s).value`, js)); got != v {
			b.t.Errorf("the limit form's %s is %q, want %q", name, got, v)
		}
	}
}
