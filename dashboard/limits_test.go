package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestLimits: the limits page lists each declared limit with the keys it
// governs, their running jobs, tokens and next start, and its weight
// when it is not 1, for read-only viewers too; with none it says how to
// declare one.
func TestLimits(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	if r := e.do(req{path: "/limits", token: readToken}); r.status != http.StatusOK || !strings.Contains(r.body, `id="no-limits"`) {
		t.Fatalf("limits, none declared: %d\n%s", r.status, r.body)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "customer:*", Concurrency: 2, Rate: 6, Per: time.Hour, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "api", Concurrency: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "heavy", Weight: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "tenant:*", Concurrency: 1, Rate: 2, Weight: 5}); err != nil {
		t.Fatal(err)
	}
	if g, err := e.store.TakeTokens(ctx, "customer:42", 3); err != nil || !g.Granted {
		t.Fatalf("TakeTokens: %+v %v", g, err)
	}
	r := e.do(req{path: "/limits", token: readToken})
	if r.status != http.StatusOK {
		t.Fatalf("limits: %d\n%s", r.status, r.body)
	}
	for _, want := range []string{
		`<a href="/limits" aria-current="page">Limits</a>`,
		`id="limit-api"`, "4 at once",
		`id="limit-customer:*"`, "2 at once · 6 per 1 h, bursts of 3\n</p>",
		`id="limit-heavy"`, "no bound on running jobs · weight 3\n</p>",
		`id="limit-tenant:*"`, "1 at once · 2 per 1 s, bursts of 2 · weight 5\n</p>",
		`id="key-customer:42"`, `<td class="running">0 of 2</td>`, `<td class="tokens">0</td>`, "(in ",
		`href="/jobs?group=customer%3A42"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the limits page lacks %q", want)
		}
	}
	if strings.Contains(r.body, "weight 1") {
		t.Error("the limits page shows a weight of 1, the default")
	}
	if t.Failed() {
		t.Log(r.body)
	}
}
