package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// TestLimitsCLI: limits set|list|get|delete|take and enqueue --key,
// directly on a database and through a server, with their refusals.
func TestLimitsCLI(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "limits.db")
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := httpapi.New(httpapi.Config{Store: st, Tokens: []string{"full-0123456789abcdef"}, ReadTokens: []string{"ro-0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, &out, &errOut); code != wantCode {
			t.Fatalf("readpast %v: exit %d, want %d: %s%s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	for name, target := range map[string][]string{"direct": {"--database-url", db}, "remote": {"--url", srv.URL, "--token", "full-0123456789abcdef"}} {
		t.Run(name, func(t *testing.T) {
			p := name + ":" // each target its own keys
			with := func(args ...string) []string { return append(args, target...) }
			if out := cli(0, with("limits", "set", p+"customer:*", "--concurrency", "5", "--rate", "10", "--burst", "20")...); !strings.Contains(out, "created limit "+p+"customer:*") ||
				!strings.Contains(out, "5 at once") || !strings.Contains(out, "10 per 1s, burst 20") || !strings.Contains(out, "template") {
				t.Errorf("limits set = %q", out)
			}
			var l httpapi.Limit
			if err := json.Unmarshal([]byte(cli(0, with("limits", "set", p+"customer:*", "--concurrency", "2", "--rate", "10", "--per", "1h", "--json")...)), &l); err != nil ||
				l != (httpapi.Limit{Key: p + "customer:*", Concurrency: 2, Rate: 10, PerSeconds: 3600, Burst: 10, Weight: 1}) {
				t.Errorf("limits set --json = %+v, %v", l, err)
			}
			if out := cli(0, with("limits", "set", p+"customer:*", "--concurrency", "2")...); !strings.HasPrefix(out, "replaced limit ") || !regexp.MustCompile(`\nrate: +none\n`).MatchString(out) ||
				!regexp.MustCompile(`\nweight: +1\n`).MatchString(out) {
				t.Errorf("limits set again = %q", out)
			}

			// A weight, alone or with other bounds: set, get, list.
			if out := cli(0, with("limits", "set", p+"heavy", "--weight", "3")...); !strings.Contains(out, "created limit "+p+"heavy") ||
				!regexp.MustCompile(`\nconcurrency: +no bound\n`).MatchString(out) || !regexp.MustCompile(`\nweight: +3\n`).MatchString(out) {
				t.Errorf("limits set --weight 3 = %q", out)
			}
			if err := json.Unmarshal([]byte(cli(0, with("limits", "set", p+"heavy", "--concurrency", "4", "--weight", "100", "--json")...)), &l); err != nil ||
				l != (httpapi.Limit{Key: p + "heavy", Concurrency: 4, Weight: 100}) {
				t.Errorf("limits set --weight 100 --json = %+v, %v", l, err)
			}
			if out := cli(0, with("limits", "get", p+"heavy")...); !regexp.MustCompile(`\nweight: +100\n`).MatchString(out) {
				t.Errorf("limits get of a weighted limit = %q", out)
			}
			if out := cli(0, with("limits", "list")...); !strings.Contains(out, " WEIGHT ") ||
				!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(p+"heavy")+` +4 +- +- +100 +0 +0$`).MatchString(out) ||
				!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(p+"customer:*")+` +2 +- +- +1 `).MatchString(out) {
				t.Errorf("limits list with weights = %q", out)
			}
			cli(0, with("limits", "delete", p+"heavy")...)

			// A job of a key the template governs runs: get shows the key.
			cli(0, with("enqueue", "--kind", "sync", "--queue", p+"q", "--key", p+"customer:42")...)
			jobs, err := st.Claim(ctx, readpast.ClaimParams{Worker: "w", Queues: []string{p + "q"}, Limit: 5, Lease: time.Minute})
			if err != nil || len(jobs) != 1 || jobs[0].Group == nil || *jobs[0].Group != p+"customer:42" {
				t.Fatalf("claimed %+v, %v; want the job of key customer:42", jobs, err)
			}
			if out := cli(0, with("limits", "get", p+"customer:*")...); !strings.Contains(out, "KEY") || !strings.Contains(out, p+"customer:42  1 ") {
				t.Errorf("limits get = %q", out)
			}
			var li httpapi.LimitInfo
			if err := json.Unmarshal([]byte(cli(0, with("limits", "show", p+"customer:*", "--json")...)), &li); err != nil ||
				len(li.Keys) != 1 || li.Keys[0].Running != 1 {
				t.Errorf("limits show --json = %+v, %v", li, err)
			}
			if out := cli(0, with("limits", "list")...); !strings.HasPrefix(out, "KEY ") || !strings.Contains(out, p+"customer:*") {
				t.Errorf("limits list = %q", out)
			}
			var all httpapi.LimitsResponse
			if err := json.Unmarshal([]byte(cli(0, with("limits", "list", "--json")...)), &all); err != nil || len(all.Limits) == 0 {
				t.Errorf("limits list --json = %+v, %v", all, err)
			}

			// Tokens: all or none, and a refusal says when.
			cli(0, with("limits", "set", p+"api", "--rate", "1", "--per", "1h", "--burst", "2")...)
			if out := cli(0, with("limits", "take", p+"api", "2")...); out != "granted 2 tokens of "+p+"api\n" {
				t.Errorf("limits take 2 = %q", out)
			}
			if out := cli(0, with("limits", "take", p+"api")...); !strings.HasPrefix(out, "not granted: "+p+"api can give 1 token at ") || !strings.Contains(out, "(in 59m") {
				t.Errorf("limits take of an empty bucket = %q", out)
			}
			var g httpapi.TokenGrant
			if err := json.Unmarshal([]byte(cli(0, with("limits", "take", p+"api", "--json")...)), &g); err != nil || g.Granted || g.RetryAt == nil {
				t.Errorf("limits take --json = %+v, %v", g, err)
			}
			if out := cli(1, with("limits", "take", p+"api", "3")...); !strings.Contains(out, "burst") {
				t.Errorf("limits take over the burst = %q", out)
			}

			// Keys a path must escape.
			for _, key := range []string{p + "a/b", "..", "100%", "q?x#y"} {
				cli(0, with("limits", "set", key, "--concurrency", "3")...)
				if out := cli(0, with("limits", "get", key)...); !regexp.MustCompile(`(?m)^key: +` + regexp.QuoteMeta(key) + `$`).MatchString(out) {
					t.Errorf("limits get %q = %q", key, out)
				}
				cli(0, with("limits", "take", key)...)
				cli(0, with("limits", "delete", key)...)
			}

			if out := cli(0, with("limits", "delete", p+"customer:*")...); out != "deleted limit "+p+"customer:*\n" {
				t.Errorf("limits delete = %q", out)
			}
			for _, args := range [][]string{{"limits", "delete", p + "customer:*"}, {"limits", "get", p + "customer:*"}} {
				if out := cli(1, with(args...)...); !strings.Contains(out, `no limit is declared for "`+p+`customer:*"`) {
					t.Errorf("%v after the delete = %q", args, out)
				}
			}

			// Usage errors, before anything is sent.
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{"limits", "set", "k", "--concurrency", "1", "--burst", "5"}, "--rate"},
				{[]string{"limits", "set", "k", "--rate", "1", "--per", "0s"}, "--per"},
				{[]string{"limits", "set", "k", "--rate", "1", "--per", "25h"}, "--per"},
				{[]string{"limits", "set", "k", "--rate", "10", "--burst", "1000001"}, "--burst"},
				{[]string{"limits", "set", "k", "--weight", "0"}, "--weight: must be between 1 and 100"},
				{[]string{"limits", "set", "k", "--concurrency", "1", "--weight", "101"}, "--weight: must be between 1 and 100"},
				{[]string{"limits", "set", "k", "--concurrency", "1", "--weight", "-1"}, "--weight"},
				{[]string{"limits", "set", "a*b", "--concurrency", "1"}, "key"},
				{[]string{"limits", "set", "--concurrency", "1"}, "want exactly one key"},
				{[]string{"limits", "get", "a b"}, "key"},
				{[]string{"limits", "take", "k", "0"}, "N must be"},
				{[]string{"limits", "take", "k", "1", "2"}, "want a key"},
				{[]string{"limits", "frob"}, "unknown action"},
				{[]string{"enqueue", "--kind", "k", "--key", "a", "--group", "b"}, "--group is the job's first key"},
				{[]string{"enqueue", "--kind", "k", "--key", "a b"}, "--key:"},
				{[]string{"enqueue", "--stdin", "--key", "a"}, "--key cannot be used with --stdin"},
				{[]string{"schedules", "set", "s", "--cron", "@hourly", "--kind", "k", "--key", "a b"}, "--key:"},
			} {
				if out := cli(2, with(tc.args...)...); !strings.Contains(out, tc.want) {
					t.Errorf("readpast %v: %q, want it to contain %q", tc.args, out, tc.want)
				}
			}
		})
	}

	// A read-only token lists and gets limits, and changes none.
	ro := []string{"--url", srv.URL, "--token", "ro-0123456789abcdef"}
	cli(0, "limits", "set", "ro:k", "--concurrency", "1", "--database-url", db)
	cli(0, append([]string{"limits", "list"}, ro...)...)
	cli(0, append([]string{"limits", "get", "ro:k"}, ro...)...)
	for _, args := range [][]string{{"limits", "set", "ro:k", "--concurrency", "2"}, {"limits", "delete", "ro:k"}, {"limits", "take", "ro:k"}} {
		if out := cli(1, append(args, ro...)...); !strings.Contains(out, "full-access token") {
			t.Errorf("%v with a read-only token = %q", args, out)
		}
	}
}
