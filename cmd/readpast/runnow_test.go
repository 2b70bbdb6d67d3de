package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// TestRunNowCLI: `jobs run ID` makes a scheduled job due now and refuses
// a job that is not pending, and `schedules run NAME` enqueues the
// schedule's job due now, paused or not, leaving its ticks alone;
// directly on a database and through a server, with their refusals.
func TestRunNowCLI(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "runnow.db")
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
	get := func(id int64) *readpast.Job {
		t.Helper()
		j, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for name, target := range map[string][]string{"direct": {"--database-url", db}, "remote": {"--url", srv.URL, "--token", "full-0123456789abcdef"}} {
		t.Run(name, func(t *testing.T) {
			with := func(args ...string) []string { return append(args, target...) }
			q := name + "-q"
			jobs, err := st.Enqueue(ctx, []readpast.EnqueueParams{
				{Kind: "invoice", Queue: q, RunAt: time.Now().Add(time.Hour)},
				{Kind: "invoice", Queue: q, RunAt: time.Now().Add(-time.Minute)},
			})
			if err != nil {
				t.Fatal(err)
			}
			later, due := jobs[0], jobs[1]

			// A scheduled job: due now.
			out := cli(0, with("jobs", "run", fmt.Sprint(later.ID))...)
			if j := get(later.ID); j.State != readpast.StatePending || time.Until(j.RunAt) > time.Second || !strings.Contains(out, "pending") {
				t.Fatalf("jobs run: %q; the job is %s at %v, want pending and due now", out, j.State, j.RunAt)
			}
			// A due job: unchanged, and --json prints it.
			var wj httpapi.Job
			if err := json.Unmarshal([]byte(cli(0, with("jobs", "run", fmt.Sprint(due.ID), "--json")...)), &wj); err != nil ||
				wj.ID != due.ID || !wj.RunAt.Equal(due.RunAt) {
				t.Fatalf("jobs run --json of a due job: %+v, %v; want it unchanged at %v", wj, err, due.RunAt)
			}
			// Not pending: refused, and left as it is.
			if _, err := st.Cancel(ctx, due.ID); err != nil {
				t.Fatal(err)
			}
			if out := cli(1, with("jobs", "run", fmt.Sprint(due.ID))...); !strings.Contains(out, fmt.Sprintf("cannot run job %d in its state", due.ID)) {
				t.Errorf("jobs run of a cancelled job = %q", out)
			}
			if j := get(due.ID); j.State != readpast.StateCancelled {
				t.Fatalf("jobs run made a cancelled job %s", j.State)
			}
			if out := cli(1, with("jobs", "run", "999999")...); !strings.Contains(out, "job 999999 not found") {
				t.Errorf("jobs run of an unknown job = %q", out)
			}

			// A schedule: its job, due now; its ticks unchanged.
			sname := name + "-nightly"
			cli(0, with("schedules", "set", sname, "--cron", "0 3 * * *", "--kind", "report", "--queue", q, "--priority", "2")...)
			before, err := st.GetSchedule(ctx, sname)
			if err != nil {
				t.Fatal(err)
			}
			out = cli(0, with("schedules", "run", sname)...)
			var made int64
			if _, err := fmt.Sscanf(out, "made job %d from schedule "+sname, &made); err != nil {
				t.Fatalf("schedules run = %q: %v", out, err)
			}
			if j := get(made); j.Kind != "report" || j.Queue != q || j.Priority != 2 || j.State != readpast.StatePending || time.Until(j.RunAt) > time.Second {
				t.Fatalf("schedules run made %+v", j)
			}
			after, err := st.GetSchedule(ctx, sname)
			if err != nil {
				t.Fatal(err)
			}
			if !after.NextRunAt.Equal(*before.NextRunAt) || after.LastRunAt != nil || after.Version != before.Version {
				t.Fatalf("schedules run changed the schedule: %+v, was %+v", after, before)
			}
			// Paused: it runs too, --json prints the job.
			cli(0, with("schedules", "pause", sname)...)
			if err := json.Unmarshal([]byte(cli(0, with("schedules", "run", sname, "--json")...)), &wj); err != nil || wj.Kind != "report" || wj.ID == made {
				t.Fatalf("schedules run --json of a paused schedule: %+v, %v", wj, err)
			}
			if out := cli(1, with("schedules", "run", "none")...); !strings.Contains(out, `schedule "none" not found`) {
				t.Errorf("schedules run of an unknown schedule = %q", out)
			}

			// Usage errors, before anything is sent.
			for _, args := range [][]string{{"jobs", "run"}, {"jobs", "run", "x"}, {"schedules", "run"}, {"schedules", "run", "a", "b"}} {
				cli(2, with(args...)...)
			}
		})
	}

	// A read-only token runs nothing.
	ro := []string{"--url", srv.URL, "--token", "ro-0123456789abcdef"}
	js, err := st.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "ro", RunAt: time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"jobs", "run", fmt.Sprint(js[0].ID)}, {"schedules", "run", "remote-nightly"}} {
		if out := cli(1, append(args, ro...)...); !strings.Contains(out, "full-access token") {
			t.Errorf("%v with a read-only token = %q", args, out)
		}
	}
	if j := get(js[0].ID); !j.RunAt.Equal(js[0].RunAt) {
		t.Fatalf("a read-only jobs run moved the run-at from %v to %v", js[0].RunAt, j.RunAt)
	}
	// The usage names the actions.
	if out := cli(0, "jobs", "--help"); !strings.Contains(out, "|run|") {
		t.Errorf("jobs --help = %q", out)
	}
	if out := cli(0, "schedules", "--help"); !strings.Contains(out, "|run") {
		t.Errorf("schedules --help = %q", out)
	}
}
