package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// TestTagsAndBulkCLI: enqueue --tag, jobs list --tag, jobs bulk
// retry|cancel|delete and jobs delete, directly on a database and through
// a server, with their counts and their refusals.
func TestTagsAndBulkCLI(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "bulk.db")
	st, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := httpapi.New(httpapi.Config{Store: st})
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
	for _, target := range [][]string{{"--database-url", db}, {"--url", srv.URL}} {
		cli(0, append([]string{"enqueue", "--kind", "k", "--queue", "cq", "--tag", "red", "--tag", "blue"}, target...)...)
		cli(0, append([]string{"enqueue", "--kind", "k", "--queue", "cq"}, target...)...)
		if out := cli(2, append([]string{"enqueue", "--kind", "k", "--tag", "a b"}, target...)...); !strings.Contains(out, "--tag") {
			t.Errorf("bad tag: %q", out)
		}
		var page struct{ Jobs []httpapi.Job }
		if err := json.Unmarshal([]byte(cli(0, append([]string{"jobs", "list", "--tag", "red", "--json"}, target...)...)), &page); err != nil ||
			len(page.Jobs) != 1 || strings.Join(page.Jobs[0].Tags, ",") != "red,blue" {
			t.Fatalf("list --tag red: %+v %v", page, err)
		}
		if out := cli(0, append([]string{"jobs", "show", itoa(page.Jobs[0].ID)}, target...)...); !strings.Contains(out, "red, blue") {
			t.Errorf("jobs show of a tagged job prints no tags: %q", out)
		}
		if out := cli(2, append([]string{"jobs", "bulk", "cancel"}, target...)...); !strings.Contains(out, "at least one of --queue") {
			t.Errorf("bulk without a filter: %q", out)
		}
		// An empty filter flag (an unset shell variable) is refused, not
		// read as no filter: this would cancel kind k in every queue.
		if out := cli(2, append([]string{"jobs", "bulk", "cancel", "--queue", "", "--kind", "k"}, target...)...); !strings.Contains(out, "--queue is empty") {
			t.Errorf("bulk with --queue \"\": %q", out)
		}
		if out := cli(2, append([]string{"jobs", "list", "--kind="}, target...)...); !strings.Contains(out, "--kind is empty") {
			t.Errorf("list with --kind=: %q", out)
		}
		if out := cli(0, append([]string{"jobs", "bulk", "cancel", "--queue", "cq"}, target...)...); out != "cancelled 2 jobs\n" {
			t.Errorf("bulk cancel: %q", out)
		}
		if out := cli(0, append([]string{"jobs", "bulk", "retry", "--tag", "blue", "--json"}, target...)...); strings.TrimSpace(out) != `{"count":1}` && !strings.Contains(out, `"count": 1`) {
			t.Errorf("bulk retry --json: %q", out)
		}
		if out := cli(0, append([]string{"jobs", "bulk", "delete", "--queue", "cq", "--state", "cancelled"}, target...)...); out != "deleted 1 jobs\n" {
			t.Errorf("bulk delete: %q", out)
		}
		res, err := st.List(ctx, readpast.ListParams{Queue: "cq"})
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].State != readpast.StatePending {
			t.Fatalf("left in cq: %+v %v", res.Jobs, err)
		}
		id := res.Jobs[0].ID
		if out := cli(1, append([]string{"jobs", "delete", itoa(id)}, target...)...); !strings.Contains(out, "cannot delete job") {
			t.Errorf("delete a pending job: %q", out)
		}
		cli(0, append([]string{"jobs", "cancel", itoa(id)}, target...)...)
		if out := cli(0, append([]string{"jobs", "delete", itoa(id)}, target...)...); out != "deleted job "+itoa(id)+"\n" {
			t.Errorf("delete: %q", out)
		}
		cli(1, append([]string{"jobs", "delete", itoa(id)}, target...)...)
	}
}

func itoa(id int64) string { b, _ := json.Marshal(id); return string(b) }
