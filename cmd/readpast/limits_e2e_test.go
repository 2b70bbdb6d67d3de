package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// runLimitsE2E drives the limits endpoints and `readpast limits` against
// a running server (remote, with a full token) and on its database
// directly, from TestE2E.
func runLimitsE2E(t *testing.T, bin string, api client, remote, direct []string) {
	ro := api.with("read-token-0123456789")
	if out := mustCLI(t, bin, "", append([]string{"limits", "set", "e2e:*", "--concurrency", "2", "--rate", "5", "--per", "1h", "--weight", "2"}, remote...)...); !strings.Contains(out, "created limit e2e:*") {
		t.Errorf("limits set = %q", out)
	}
	var l struct {
		Key         string  `json:"key"`
		Concurrency int     `json:"concurrency"`
		Rate        int     `json:"rate"`
		PerSeconds  float64 `json:"per_seconds"`
		Burst       int     `json:"burst"`
		Weight      int     `json:"weight"`
		Keys        []struct {
			Key     string `json:"key"`
			Running int    `json:"running"`
			Tokens  int    `json:"tokens"`
		} `json:"keys"`
	}
	ro.must("GET", "/v1/limits/e2e:*", "", 200, &l)
	if l.Key != "e2e:*" || l.Concurrency != 2 || l.Rate != 5 || l.PerSeconds != 3600 || l.Burst != 5 || l.Weight != 2 || l.Keys == nil {
		t.Errorf("GET /v1/limits/e2e:* = %+v", l)
	}
	ro.wantError("PUT", "/v1/limits/e2e:*", `{"concurrency":1}`, 403, "forbidden", "")
	ro.wantError("POST", "/v1/limits/e2e:1/tokens", `{"n":1}`, 403, "forbidden", "")
	api.wantError("PUT", "/v1/limits/e2e:*", `{"concurrency":1,"per":"1s"}`, 400, "invalid_field", "per")

	// A job of e2e:1 runs and takes a token; TakeTokens takes the rest.
	mustCLI(t, bin, "", append([]string{"enqueue", "--kind", "lim", "--queue", "lq", "--key", "e2e:1"}, direct...)...)
	var c jobsBody
	api.must("POST", "/v1/claim", `{"worker":"w","queues":["lq"],"limit":5}`, 200, &c)
	if len(c.Jobs) != 1 {
		t.Fatalf("claimed %+v", c.Jobs)
	}
	var li struct {
		Keys []struct {
			Key     string `json:"key"`
			Running int    `json:"running"`
			Tokens  int    `json:"tokens"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, bin, "", append([]string{"limits", "get", "e2e:*", "--json"}, direct...)...)), &li); err != nil ||
		len(li.Keys) != 1 || li.Keys[0].Key != "e2e:1" || li.Keys[0].Running != 1 || li.Keys[0].Tokens != 4 {
		t.Errorf("limits get --json = %+v, %v", li, err)
	}
	if out := mustCLI(t, bin, "", append([]string{"limits", "take", "e2e:1", "4"}, remote...)...); out != "granted 4 tokens of e2e:1\n" {
		t.Errorf("limits take 4 = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"limits", "take", "e2e:1"}, direct...)...); !strings.HasPrefix(out, "not granted: e2e:1 can give 1 token at ") {
		t.Errorf("limits take of an empty bucket = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"limits", "list"}, ro.cliArgs(remote)...)...); !strings.Contains(out, "e2e:*") {
		t.Errorf("limits list with a read token = %q", out)
	}
	if out := mustCLI(t, bin, "", append([]string{"limits", "delete", "e2e:*"}, direct...)...); out != "deleted limit e2e:*\n" {
		t.Errorf("limits delete = %q", out)
	}
	api.wantError("DELETE", "/v1/limits/e2e:*", "", 404, "not_found", "")
	if r := runCLI(t, bin, "", append([]string{"limits", "get", "e2e:*"}, remote...)...); r.code != 1 || !strings.Contains(r.stderr, `no limit is declared for "e2e:*"`) {
		t.Errorf("limits get after delete: %+v", r)
	}
}

// cliArgs is remote (--url URL --token T) with c's token instead.
func (c client) cliArgs(remote []string) []string {
	out := append([]string(nil), remote...)
	for i := range out {
		if out[i] == "--token" && i+1 < len(out) {
			out[i+1] = c.token
		}
	}
	return out
}
