package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// TestEnqueueKeysCLI: enqueue --key (repeatable) gives a job its keys,
// directly on a database and through a server; one key goes as the
// job's group (what every server takes), several as "keys"; jobs show and
// jobs list show the keys after the group; bad keys are usage errors
// before anything is sent.
func TestEnqueueKeysCLI(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "keys.db")
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := httpapi.New(httpapi.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sent []byte // the body of the last POST /v1/jobs/batch
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/jobs") {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			sent = b
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, &out, &errOut); code != wantCode {
			t.Fatalf("readpast %v: exit %d, want %d: %s%s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	lastSent := func() string {
		mu.Lock()
		defer mu.Unlock()
		return string(sent)
	}
	for name, target := range map[string][]string{"direct": {"--database-url", db}, "remote": {"--url", srv.URL}} {
		t.Run(name, func(t *testing.T) {
			q := name + "-q"
			with := func(args ...string) []string { return append(args, target...) }
			var j httpapi.Job
			if err := json.Unmarshal([]byte(cli(0, with("enqueue", "--kind", "k", "--queue", q, "--key", "a", "--key", "b", "--json")...)), &j); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(j.Keys, []string{"a", "b"}) || j.Group == nil || *j.Group != "a" {
				t.Errorf("enqueue --key a --key b: keys %q, group %v", j.Keys, j.Group)
			}
			if name == "remote" && !strings.Contains(lastSent(), `"keys":["a","b"]`) {
				t.Errorf("enqueue --key a --key b sent %s", lastSent())
			}
			id := strconv.FormatInt(j.ID, 10)
			if out := cli(0, with("jobs", "show", id)...); !regexp.MustCompile(`(?m)^group: +a$`).MatchString(out) || !regexp.MustCompile(`(?m)^keys: +a, b$`).MatchString(out) {
				t.Errorf("jobs show of a job with two keys = %q", out)
			}
			if out := cli(0, with("jobs", "list", "--queue", q)...); !strings.Contains(out, " GROUP  MORE KEYS\n") || !regexp.MustCompile(`(?m)^`+id+` .* a +b$`).MatchString(out) {
				t.Errorf("jobs list of a job with two keys = %q", out)
			}

			// One key is the group, sent as "group"; --group may repeat the first key.
			if err := json.Unmarshal([]byte(cli(0, with("enqueue", "--kind", "k", "--queue", q+"1", "--key", "solo", "--json")...)), &j); err != nil {
				t.Fatal(err)
			}
			if j.Group == nil || *j.Group != "solo" || len(j.Keys) > 1 {
				t.Errorf("enqueue --key solo: keys %q, group %v", j.Keys, j.Group)
			}
			if name == "remote" && (!strings.Contains(lastSent(), `"group":"solo"`) || strings.Contains(lastSent(), `"keys"`)) {
				t.Errorf("enqueue --key solo sent %s", lastSent())
			}
			if out := cli(0, with("jobs", "list", "--queue", q+"1")...); strings.Contains(out, "MORE KEYS") {
				t.Errorf("jobs list of a job with one key = %q", out)
			}
			if err := json.Unmarshal([]byte(cli(0, with("enqueue", "--kind", "k", "--queue", q+"2", "--group", "g", "--key", "g", "--key", "h", "--key", "i", "--json")...)), &j); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(j.Keys, []string{"g", "h", "i"}) || j.Group == nil || *j.Group != "g" {
				t.Errorf("enqueue --group g --key g --key h --key i: keys %q, group %v", j.Keys, j.Group)
			}

			// --stdin lines take "keys".
			var stdout, stderr bytes.Buffer
			if err := enqueueFrom(ctx, strings.NewReader(`{"kind":"k","queue":"`+q+`3","keys":["s1","s2"]}`+"\n"), with("--stdin", "--json"), &stdout, &stderr); err != nil {
				t.Fatalf("enqueue --stdin: %v (%s)", err, stderr.String())
			}
			if err := json.Unmarshal(stdout.Bytes(), &j); err != nil || !slices.Equal(j.Keys, []string{"s1", "s2"}) {
				t.Errorf("enqueue --stdin with keys: %s, %v", stdout.String(), err)
			}
			if err := enqueueFrom(ctx, strings.NewReader(`{"kind":"k","keys":["1","2","3","4","5"]}`+"\n"), with("--stdin"), &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "line 1: keys:") {
				t.Errorf("enqueue --stdin with five keys: %v", err)
			}

			// Usage errors, before anything is sent.
			for _, tc := range []struct {
				args []string
				want string
			}{
				{[]string{"--key", "a", "--group", "b"}, "--group is the job's first key"},
				{[]string{"--key", "a", "--key", "b", "--group", "b"}, "--group is the job's first key"},
				{[]string{"--key", "1", "--key", "2", "--key", "3", "--key", "4", "--key", "5"}, "--key: 5 keys, at most 4"},
				{[]string{"--key", "a", "--key", "a"}, "--key: key \"a\" given twice"},
				{[]string{"--key", "a", "--key", "b c"}, "--key: key 1"},
				{[]string{"--key", "a b"}, "--key:"},
			} {
				args := with(append([]string{"enqueue", "--kind", "k", "--queue", q + "-bad"}, tc.args...)...)
				if out := cli(2, args...); !strings.Contains(out, tc.want) {
					t.Errorf("readpast %v: %q, want it to contain %q", args, out, tc.want)
				}
			}
			if out := cli(0, with("jobs", "list", "--queue", q+"-bad")...); strings.Count(out, "\n") != 1 {
				t.Errorf("a refused enqueue stored jobs: %q", out)
			}
		})
	}
}

// TestPrintJobKeys: jobs show prints every key of a job with several,
// and jobs list adds a MORE KEYS column (the keys after the group) only
// when a listed job has more than one key.
func TestPrintJobKeys(t *testing.T) {
	g := "a"
	var out bytes.Buffer
	if err := printJob(&out, httpapi.Job{Job: readpast.Job{ID: 1, Group: &g, Keys: []string{"a", "b", "c"}}}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^group: +a\nkeys: +a, b, c\nrun at: `).MatchString(out.String()) {
		t.Errorf("printJob = %q", out.String())
	}
	out.Reset()
	if err := printJob(&out, httpapi.Job{Job: readpast.Job{ID: 1, Group: &g, Keys: []string{"a"}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "keys:") {
		t.Errorf("printJob of a job with one key = %q", out.String())
	}
	rows := []json.RawMessage{
		json.RawMessage(`{"id":1,"queue":"q","kind":"k","state":"pending","group":"a","keys":["a","b","c"]}`),
		json.RawMessage(`{"id":2,"queue":"q","kind":"k","state":"pending","group":null}`),
	}
	out.Reset()
	if err := printJobs(&out, rows); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "  GROUP  MORE KEYS\n") || !regexp.MustCompile(`(?m)^1 .* a +b,c$`).MatchString(s) || !regexp.MustCompile(`(?m)^2 .* - +-$`).MatchString(s) {
		t.Errorf("printJobs = %q", s)
	}
	out.Reset()
	if err := printJobs(&out, rows[1:]); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "MORE KEYS") || !strings.HasSuffix(strings.SplitN(s, "\n", 2)[0], "GROUP") {
		t.Errorf("printJobs without keys = %q", s)
	}
}
