package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestRunNowActions: a job page's Run now makes a scheduled job due and
// refuses a job that failed or was cancelled since the page was shown
// (409, the job left as it is: not revived); the schedules page offers
// Run now to full access only, and its run enqueues the schedule's job
// and comes back to the page, which names the job with a link.
func TestRunNowActions(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	later := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: time.Now().Add(time.Hour)})
	path := "/jobs/" + strconv.FormatInt(later.ID, 10)
	page := e.do(req{path: path, token: fullToken})
	if !strings.Contains(page.body, `action="`+path+`/run"`) {
		t.Fatalf("a scheduled job's page offers no Run now:\n%s", page.body)
	}
	csrf := csrfOf(t, page.body)
	post := func(path, token string) resp {
		t.Helper()
		return e.do(req{method: "POST", path: path, token: token, form: url.Values{csrfField: {csrf}}})
	}
	if r := post(path+"/run", fullToken); r.status != http.StatusSeeOther {
		t.Fatalf("run: %d", r.status)
	}
	if j, err := e.store.Get(ctx, later.ID); err != nil || time.Until(j.RunAt) > time.Second {
		t.Fatalf("after Run now the job is due at %v (%v)", j.RunAt, err)
	}
	// Cancelled after the page was shown: refused, not revived.
	if _, err := e.store.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	if r := post(path+"/run", fullToken); r.status != http.StatusConflict {
		t.Fatalf("run of a cancelled job: %d, want 409", r.status)
	}
	if j, err := e.store.Get(ctx, later.ID); err != nil || j.State != readpast.StateCancelled {
		t.Fatalf("run of a cancelled job made it %v (%v)", j.State, err)
	}

	if _, _, err := e.store.PutSchedule(ctx, readpast.ScheduleParams{Name: "nightly/eu", Cron: "@daily", Job: readpast.EnqueueParams{Kind: "report", Queue: "r"}}); err != nil {
		t.Fatal(err)
	}
	before, err := e.store.GetSchedule(ctx, "nightly/eu")
	if err != nil {
		t.Fatal(err)
	}
	full := e.do(req{path: "/schedules", token: fullToken})
	if !strings.Contains(full.body, `action="/schedules/nightly%2Feu/run"`) {
		t.Fatalf("the schedules page offers no Run now:\n%s", full.body)
	}
	if ro := e.do(req{path: "/schedules", token: readToken}); strings.Contains(ro.body, "/run") {
		t.Fatalf("the schedules page offers a read-only token Run now:\n%s", ro.body)
	}
	if r := post("/schedules/nightly%2Feu/run", readToken); r.status != http.StatusForbidden {
		t.Fatalf("a read-only run: %d, want 403", r.status)
	}
	if r := post("/schedules/nosuch/run", fullToken); r.status != http.StatusNotFound {
		t.Fatalf("run of an unknown schedule: %d, want 404", r.status)
	}
	r := post("/schedules/nightly%2Feu/run", fullToken)
	loc, err := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusSeeOther || err != nil || loc.Path != "/schedules" || loc.Query().Get("done") != "schedule-run" ||
		loc.Query().Get("schedule") != "nightly/eu" {
		t.Fatalf("run: %d to %q", r.status, r.header.Get("Location"))
	}
	made, err := strconv.ParseInt(loc.Query().Get("job"), 10, 64)
	if err != nil {
		t.Fatalf("the redirect names no job: %q", r.header.Get("Location"))
	}
	res, err := e.store.List(ctx, readpast.ListParams{Queue: "r"})
	if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != made || res.Jobs[0].Kind != "report" {
		t.Fatalf("jobs of the schedule's queue: %+v (%v); want the one made, %d", res.Jobs, err, made)
	}
	if sc, err := e.store.GetSchedule(ctx, "nightly/eu"); err != nil || !sc.NextRunAt.Equal(*before.NextRunAt) || sc.LastRunAt != nil || sc.Version != before.Version {
		t.Fatalf("Run now changed the schedule: %+v (%v), was %+v", sc, err, before)
	}
	p := e.do(req{path: loc.String(), token: fullToken})
	link := fmt.Sprintf(`<a href="/jobs/%d">%d</a> made from schedule nightly/eu`, made, made)
	if !strings.Contains(p.body, link) || !regexp.MustCompile(`class="flash"[^>]*id="schedule-ran"`).MatchString(p.body) {
		t.Fatalf("after the run the page does not name the job:\n%s", p.body)
	}
	// A query that names no job, or no schedule, shows no message.
	for _, q := range []string{"schedule=nightly%2Feu&job=0", "schedule=nosuch&job=5"} {
		if p := e.do(req{path: "/schedules?done=schedule-run&" + q, token: fullToken}); strings.Contains(p.body, "schedule-ran") {
			t.Fatalf("a message for %s:\n%s", q, p.body)
		}
	}
}
