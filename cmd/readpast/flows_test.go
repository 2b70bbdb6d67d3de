package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// TestFlowsEnqueueCLI: `flows enqueue FILE|-` stores a flow directly on a
// database (SQLite and PostgreSQL) and through a server, prints its jobs
// as `jobs list` does (or the API's JSON with --json), and refuses a bad
// flow, naming the field and enqueueing nothing.
func TestFlowsEnqueueCLI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "flows.db")
	lite, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	h, err := httpapi.New(httpapi.Config{Store: lite})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	pgURL := pgtest.URL(t)
	pg, err := postgres.Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	cli := func(stdin string, wantCode int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		err := flowsFrom(ctx, strings.NewReader(stdin), args[1:], &out, &errOut)
		code := 0
		if err != nil {
			// As run reports it.
			code = 1
			var ue usageError
			if errors.As(err, &ue) {
				code = 2
			}
			errOut.WriteString(err.Error())
		}
		if code != wantCode {
			t.Fatalf("readpast %v: exit %d, want %d: %s%s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	for _, tc := range []struct {
		name   string
		store  readpast.Store
		target []string
	}{
		{"sqlite", lite, []string{"--database-url", db}},
		{"remote", lite, []string{"--url", srv.URL}},
		{"postgres", pg, []string{"--database-url", pgURL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			with := func(args ...string) []string { return append(args, tc.target...) }
			q := "cli-" + tc.name
			prior, err := tc.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "prior", Queue: q}})
			if err != nil {
				t.Fatal(err)
			}
			flow := fmt.Sprintf(`{"jobs":[
				{"ref":"a","kind":"extract","queue":%q},
				{"kind":"render","queue":%q,"after":[{"ref":"a"},{"job_id":%d,"policy":"run_anyway"}]}
			]}`, q, q, prior[0].ID)
			file := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(file, []byte(flow), 0o600); err != nil {
				t.Fatal(err)
			}

			// From a file: a table, one line a job, in the flow's order.
			out := cli("", 0, with("flows", "enqueue", file)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") ||
				!strings.Contains(lines[1], "extract") || !strings.Contains(lines[1], "pending") ||
				!strings.Contains(lines[2], "render") || !strings.Contains(lines[2], "blocked") {
				t.Fatalf("flows enqueue FILE printed:\n%s", out)
			}
			// From stdin, --json: the API's response.
			var resp httpapi.JobsResponse
			if err := json.Unmarshal([]byte(cli(flow, 0, with("flows", "enqueue", "-", "--json")...)), &resp); err != nil ||
				len(resp.Jobs) != 2 || resp.Jobs[0].State != readpast.StatePending || resp.Jobs[1].State != readpast.StateBlocked ||
				resp.Jobs[1].Queue != q {
				t.Fatalf("flows enqueue - --json: %+v %v", resp, err)
			}
			res, err := tc.store.List(ctx, readpast.ListParams{Queue: q, State: readpast.StateBlocked})
			if err != nil || len(res.Jobs) != 2 {
				t.Fatalf("blocked jobs of %s: %d, %v; want 2", q, len(res.Jobs), err)
			}

			// Refusals: nothing is enqueued.
			if out := cli(`{"jobs":[{"kind":"a","after":[{"ref":"nope"}]}]}`, 2, with("flows", "enqueue", "-")...); !strings.Contains(out, "jobs[0].after[0].ref") || !strings.Contains(out, "nothing was enqueued") {
				t.Errorf("unknown ref: %q", out)
			}
			if out := cli(`{"jobs":[{"kind":"a","after":[{"job_id":99999999}]}]}`, 1, with("flows", "enqueue", "-")...); !strings.Contains(out, "99999999") ||
				!strings.Contains(out, "jobs[0].after[0].job_id") || !strings.Contains(out, "nothing was enqueued") {
				t.Errorf("unknown parent: %q", out)
			}
			if _, err := tc.store.Cancel(ctx, prior[0].ID); err != nil {
				t.Fatal(err)
			}
			if out := cli(fmt.Sprintf(`{"jobs":[{"kind":"a","after":[{"job_id":%d}]}]}`, prior[0].ID), 1, with("flows", "enqueue", "-")...); !strings.Contains(out, fmt.Sprint(prior[0].ID)) ||
				!strings.Contains(out, "cancelled") || !strings.Contains(out, "jobs[0].after[0].job_id") || !strings.Contains(out, "nothing was enqueued") {
				t.Errorf("finished parent: %q", out)
			}
			if out := cli("", 2, with("flows", "enqueue", filepath.Join(dir, "missing.json"))...); !strings.Contains(out, "missing.json") {
				t.Errorf("missing file: %q", out)
			}
			res, err = tc.store.List(ctx, readpast.ListParams{Queue: q, Limit: 1000})
			if err != nil || len(res.Jobs) != 5 {
				t.Errorf("jobs of %s after the refusals: %d, %v; want 5", q, len(res.Jobs), err)
			}
			all, err := tc.store.List(ctx, readpast.ListParams{Kind: "a"})
			if err != nil || len(all.Jobs) != 0 {
				t.Errorf("refused flows stored %d jobs, %v", len(all.Jobs), err)
			}
		})
	}

	// Usage errors, through run.
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"flows"}, "missing action"},
		{[]string{"flows", "run"}, "unknown action"},
		{[]string{"flows", "enqueue", "--database-url", db}, "missing FILE"},
		{[]string{"flows", "enqueue", "a", "b", "--database-url", db}, "unexpected argument"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, c.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.out) {
			t.Errorf("readpast %v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"flows", "enqueue", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "POST /v1/flows") {
		t.Errorf("flows enqueue -h: %d %q", code, stdout.String())
	}
}
