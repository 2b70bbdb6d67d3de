package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// TestJobsShowRelatives: `jobs show ID` lists the job's parents and
// children (id, ref, kind, queue, state, the edge's policy and state),
// directly on SQLite and PostgreSQL and through a server, in text and in
// JSON; a job outside flows prints nothing more than before; past
// showRelatives of either, the list stops and says so; a server without
// the relatives endpoint still shows the job, with a warning.
func TestJobsShowRelatives(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "show.db")
	lite, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if err := lite.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Config{Store: lite, ReadTokens: []string{"look-only-token-123"}})
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

	cli := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, &out, &errOut); code != wantCode {
			t.Fatalf("readpast %v: exit %d, want %d\n%s%s", args, code, wantCode, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}
	for _, tc := range []struct {
		name   string
		store  readpast.Store
		target []string
	}{
		{"sqlite", lite, []string{"--database-url", db}},
		{"remote", lite, []string{"--url", srv.URL, "--token", "look-only-token-123"}},
		{"postgres", pg, []string{"--database-url", pgURL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, ok := tc.store.(readpast.FlowStore)
			if !ok {
				t.Fatalf("%T is not a readpast.FlowStore", tc.store)
			}
			show := func(id int64, more ...string) (string, string) {
				t.Helper()
				return cli(0, append(append([]string{"jobs", "show", fmt.Sprint(id)}, more...), tc.target...)...)
			}
			q := "show-" + tc.name
			jobs, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{
				{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Queue: q}},
				{Ref: "render", Job: readpast.EnqueueParams{Kind: "render", Queue: q},
					After: []readpast.After{{Ref: "extract", Policy: readpast.RunAnyway}}},
				{Job: readpast.EnqueueParams{Kind: "email", Queue: q},
					After: []readpast.After{{Ref: "render", Policy: readpast.HoldChild}, {Ref: "extract"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			a, b, c := jobs[0].ID, jobs[1].ID, jobs[2].ID

			// Text: the job, then a table of parents and one of children.
			out, _ := show(b)
			if !regexp.MustCompile(fmt.Sprintf(`^id:\s+%d\n`, b)).MatchString(out) {
				t.Errorf("jobs show does not start with the job:\n%s", out)
			}
			row := func(id int64, cells ...string) *regexp.Regexp {
				return regexp.MustCompile(`(?m)^` + fmt.Sprint(id) + `\s+` + strings.Join(cells, `\s+`) + `$`)
			}
			parents, children, found := strings.Cut(out, "children (they run after it):\n")
			if !found || !strings.Contains(parents, "parents (it runs after them):\nID  ") ||
				!row(a, "extract", "extract", q, "pending", "run_anyway", "open").MatchString(parents) ||
				!row(c, "-", "email", q, "blocked", "hold_child", "open").MatchString(children) ||
				strings.Contains(out, "more") {
				t.Errorf("jobs show %d:\n%s", b, out)
			}
			// The first job has children only.
			if out, _ := show(a); strings.Contains(out, "parents") || !strings.Contains(out, "children") ||
				!row(b, "render", "render", q, "blocked", "run_anyway", "open").MatchString(out) ||
				!row(c, "-", "email", q, "blocked", "cancel_child", "open").MatchString(out) {
				t.Errorf("jobs show %d:\n%s", a, out)
			}

			// JSON: the job as the API encodes it, with parents and children.
			out, _ = show(b, "--json")
			var sj shownJob
			if err := json.Unmarshal([]byte(out), &sj); err != nil {
				t.Fatal(err)
			}
			if sj.ID != b || sj.Kind != "render" || len(sj.Parents) != 1 || len(sj.Children) != 1 || sj.MoreParents || sj.MoreChildren ||
				sj.Parents[0].Edge != (readpast.Edge{ParentID: a, ChildID: b, ParentRef: "extract", ChildRef: "render", Policy: readpast.RunAnyway, State: readpast.EdgeOpen}) ||
				sj.Parents[0].Job == nil || sj.Parents[0].Job.ID != a || sj.Parents[0].Job.State != readpast.StatePending ||
				sj.Children[0].Edge.ChildID != c || sj.Children[0].Edge.Policy != readpast.HoldChild || sj.Children[0].Job == nil || sj.Children[0].Job.Kind != "email" {
				t.Errorf("jobs show %d --json:\n%s", b, out)
			}

			// A job outside flows: what it printed before, no more.
			lone, err := tc.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "lone", Queue: q}})
			if err != nil {
				t.Fatal(err)
			}
			out, errOut := show(lone[0].ID)
			var plain bytes.Buffer
			if err := printJob(&plain, httpapi.NewJob(lone[0])); err != nil {
				t.Fatal(err)
			}
			if out != plain.String() || errOut != "" {
				t.Errorf("jobs show of a job outside flows:\n%s\nwant:\n%s%s", out, plain.String(), errOut)
			}
			out, _ = show(lone[0].ID, "--json")
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatal(err)
			}
			if _, ok := raw["parents"]; ok || raw["children"] != nil || raw["kind"] == nil {
				t.Errorf("jobs show --json of a job outside flows: %s", out)
			}

			// showRelatives+2 children: showRelatives listed, then a note.
			fan := []readpast.FlowJob{{Ref: "top", Job: readpast.EnqueueParams{Kind: "top", Queue: q}}}
			for range showRelatives + 2 {
				fan = append(fan, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "leaf", Queue: q}, After: []readpast.After{{Ref: "top"}}})
			}
			fj, err := fs.EnqueueFlow(ctx, fan)
			if err != nil {
				t.Fatal(err)
			}
			out, _ = show(fj[0].ID)
			if n := len(regexp.MustCompile(`(?m)^\d+\s+-\s+leaf\s`).FindAllString(out, -1)); n != showRelatives ||
				!strings.HasSuffix(out, fmt.Sprintf("… and more: only the first %d are listed\n", showRelatives)) {
				t.Errorf("jobs show of a job with %d children lists %d:\n%s", showRelatives+2, n, out)
			}
			out, _ = show(fj[0].ID, "--json")
			sj = shownJob{}
			if err := json.Unmarshal([]byte(out), &sj); err != nil || len(sj.Children) != showRelatives || !sj.MoreChildren ||
				sj.Children[0].Edge.ChildID != fj[1].ID || sj.MoreParents {
				t.Errorf("jobs show --json of a job with %d children: %d listed, more %v, %v", showRelatives+2, len(sj.Children), sj.MoreChildren, err)
			}

			// An unknown job.
			if _, errOut := cli(1, append([]string{"jobs", "show", "987654321"}, tc.target...)...); errOut != "readpast jobs show: job 987654321 not found\n" {
				t.Errorf("jobs show of an unknown job: %q", errOut)
			}
		})
	}

	// A server without GET /v1/jobs/{id}/relatives answers "no such
	// route": the job is shown alone, with a warning, and the exit is 0.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/relatives") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(httpapi.ErrorBody{Error: httpapi.ErrorDetail{Code: httpapi.CodeNotFound, Message: "no such route"}})
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer old.Close()
	res, err := lite.List(ctx, readpast.ListParams{Kind: "render", Queue: "show-sqlite"})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("the render job: %v %v", res.Jobs, err)
	}
	out, errOut := cli(0, "jobs", "show", fmt.Sprint(res.Jobs[0].ID), "--url", old.URL, "--token", "look-only-token-123")
	if !regexp.MustCompile(`(?m)^kind:\s+render$`).MatchString(out) || strings.Contains(out, "parents") ||
		!strings.Contains(errOut, "warning: cannot list the job's parents and children") || !strings.Contains(errOut, "relatives") {
		t.Errorf("jobs show through a server without the relatives endpoint:\n%s\nstderr: %s", out, errOut)
	}
}
