package dashboard

import (
	"net/url"
	"testing"
)

// TestBulkFlash: the message after a bulk action says how many jobs it
// changed and, when it skipped jobs other transactions held, how many.
func TestBulkFlash(t *testing.T) {
	for q, want := range map[string]string{
		"done=bulk-cancel&count=3":           "3 jobs cancelled.",
		"done=bulk-retry&count=1":            "1 job retried.",
		"done=bulk-cancel&count=2&skipped=2": "2 jobs cancelled. 2 skipped: other transactions held them; run the action again to include them.",
		"done=bulk-cancel&count=x":           "",
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := bulkFlash(v); got != want {
			t.Errorf("bulkFlash(%s) = %q, want %q", q, got, want)
		}
	}
}
