package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// testBrowserRunNow: "Run now" on a scheduled job's page makes the job due
// (the store says so) and is offered no more; "Run now" on the schedules
// page enqueues the schedule's job due now, named with a link in the
// message, and leaves the schedule's next and last tick and its version
// as they were; a paused schedule runs too and stays paused.
func testBrowserRunNow(b *browser, st testStore) {
	ctx := context.Background()
	get := func(id int64) *readpast.Job {
		b.t.Helper()
		j, err := st.Get(ctx, id)
		if err != nil {
			b.t.Fatal(err)
		}
		return j
	}
	schedule := func(name string) *readpast.Schedule {
		b.t.Helper()
		sc, err := st.GetSchedule(ctx, name)
		if err != nil {
			b.t.Fatal(err)
		}
		return sc
	}
	dueNow := func(j *readpast.Job, what string) {
		b.t.Helper()
		if j.State != readpast.StatePending || time.Until(j.RunAt) > time.Second || time.Since(j.RunAt) > time.Minute {
			b.t.Fatalf("%s: %s at %v, want pending and due now", what, j.State, j.RunAt)
		}
	}

	// A job scheduled for later, on its page.
	jobs, err := st.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "invoice", Queue: "billing", RunAt: time.Now().Add(3 * time.Hour)}})
	if err != nil {
		b.t.Fatal(err)
	}
	id := jobs[0].ID
	b.nav(fmt.Sprintf("/jobs/%d", id))
	b.wantText("#action-run", "Run now")
	b.submit("#action-run", http.StatusOK)
	b.wantText(".flash", "Job made due now")
	dueNow(get(id), "the job after Run now")
	b.wantText("h1 .state", "pending")
	if n := b.evalInt(`document.querySelectorAll('#action-run').length`); n != 0 {
		b.t.Fatal("a job made due still offers to run now")
	}

	// A schedule, from the schedules page: one job, the ticks unchanged.
	before := schedule("nightly-report")
	b.nav("/schedules")
	b.waitVisible("table.schedules")
	b.checkLabels()
	b.submit("button[aria-label='Run schedule nightly-report now']", http.StatusOK)
	b.wantText("#schedule-ran", "made from schedule nightly-report")
	href := b.eval(`document.querySelector('#schedule-ran a').getAttribute('href')`)
	made, err := strconv.ParseInt(strings.TrimPrefix(href, "/jobs/"), 10, 64)
	if err != nil || !strings.HasPrefix(href, "/jobs/") {
		b.t.Fatalf("the message links to %q, want a job's page", href)
	}
	b.wantText("#schedule-ran", fmt.Sprintf("Job %d", made))
	j := get(made)
	dueNow(j, "the schedule's job")
	if j.Kind != "report" || j.Queue != "nightly" {
		b.t.Fatalf("Run now made a %s job in %s, want the schedule's report in nightly", j.Kind, j.Queue)
	}
	after := schedule("nightly-report")
	if after.NextRunAt == nil || !after.NextRunAt.Equal(*before.NextRunAt) || !after.LastRunAt.Equal(*before.LastRunAt) ||
		*after.LastJobID != *before.LastJobID || after.Version != before.Version {
		b.t.Fatalf("Run now moved the schedule: next %v, last %v (job %d), version %d; was %v, %v (job %d), %d",
			after.NextRunAt, after.LastRunAt, *after.LastJobID, after.Version, before.NextRunAt, before.LastRunAt, *before.LastJobID, before.Version)
	}
	b.wantText("#schedule-nightly-report td.last", fmt.Sprintf("job %d", *before.LastJobID))
	b.shot("schedule-ran")
	b.click("#schedule-ran a")
	b.wantText("h1", fmt.Sprintf("Job %d", made))

	// A paused schedule runs too, and stays paused.
	b.nav("/schedules")
	b.wantText("#schedule-hourly-sync", "paused")
	b.submit("button[aria-label='Run schedule hourly-sync now']", http.StatusOK)
	b.wantText("#schedule-ran", "made from schedule hourly-sync")
	if sc := schedule("hourly-sync"); !sc.Paused || sc.NextRunAt != nil {
		b.t.Fatalf("Run now changed the paused schedule: paused %v, next %v", sc.Paused, sc.NextRunAt)
	}
	b.wantText("#schedule-hourly-sync", "paused")
}
