package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/testbin"
)

var updateScreenshots = flag.Bool("update-screenshots", false,
	"write the overview screenshot the browser test takes on PostgreSQL to docs/img/overview.png (for the README)")

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	readpastBin.Remove()
	os.Exit(code)
}

// envArtifacts names the directory the browser test saves its screenshots
// in (default: a temporary directory, removed after the test).
const envArtifacts = "READPAST_ARTIFACTS"

// TestBrowser builds readpast, runs `readpast serve` on PostgreSQL with a
// full and a read-only token, and drives headless Chromium through every
// page and action: the login and its cookie, the overview and its live
// refresh, the job list's filters, search and paging, a job's page, every
// action with the database checked after it, the keyboard, a phone's
// width, dark mode, a read-only login, forged cross-site posts, and a
// job's parents and children and its flow's drawing, and a batch's panel
// and seal. It
// saves a screenshot of each page.
func TestBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	bin := readpastBin.Path(t)
	for _, open := range []func(*testing.T) *backend{sqliteBackend, postgresBackend} {
		bk := open(t)
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel() // a server and a browser each
			testBrowser(t, chrome, bin, bk)
		})
	}
}

func testBrowser(t *testing.T, chrome, bin string, bk *backend) {
	s := seed(t, bk)
	srv := startServe(t, bin, "--database-url", bk.url, "--token", fullToken, "--read-token", readToken, "--dashboard-refresh", "1s")
	b := newBrowser(t, chrome, srv.base, bk.name)
	st := bk.st

	t.Run("login", func(t *testing.T) { b.t = t; testBrowserLogin(b) })
	t.Run("overview", func(t *testing.T) { b.t = t; testBrowserOverview(b, st) })
	t.Run("jobs", func(t *testing.T) { b.t = t; testBrowserJobs(b, bk, s) })
	t.Run("job page", func(t *testing.T) { b.t = t; testBrowserJob(b, s) })
	t.Run("actions", func(t *testing.T) { b.t = t; testBrowserActions(b, st, s) })
	t.Run("schedules", func(t *testing.T) { b.t = t; testBrowserSchedules(b, st, s) })
	t.Run("run now", func(t *testing.T) { b.t = t; testBrowserRunNow(b, st) })
	t.Run("limits", func(t *testing.T) { b.t = t; testBrowserLimits(b, st) })
	t.Run("bulk", func(t *testing.T) { b.t = t; testBrowserBulk(b, st) })
	t.Run("queue page", func(t *testing.T) { b.t = t; testBrowserQueuePage(b, bk) })
	t.Run("retries", func(t *testing.T) { b.t = t; testBrowserRetries(b, bk) })
	t.Run("keyboard", func(t *testing.T) { b.t = t; testBrowserKeyboard(b, st) })
	t.Run("phone and dark", func(t *testing.T) { b.t = t; testBrowserPhoneDark(b, s) })
	t.Run("forged posts", func(t *testing.T) { b.t = t; testBrowserForgery(b, st, s) })
	t.Run("read-only", func(t *testing.T) { testBrowserReadOnly(b.other(t), st, s) })
	t.Run("flow", func(t *testing.T) { b.t = t; testBrowserFlow(b, st) })
	t.Run("batch", func(t *testing.T) { b.t = t; testBrowserBatch(b, st) })
	t.Run("logout", func(t *testing.T) { b.t = t; testBrowserLogout(b) })
}

// seeded names the jobs the test acts on.
type seeded struct {
	failed, pending, running, scheduled, long, needle int64
	// nightlyJob is the job the schedule nightly-report made at its last
	// run.
	nightlyJob int64
}

// seed fills the database: an hour of finished jobs in four queues (for
// the charts), live jobs in groups, and the jobs the actions need.
func seed(t *testing.T, bk *backend) seeded {
	t.Helper()
	ctx := context.Background()
	st := bk.st
	bk.addHistory(t, hourOfHistory(time.Now()))
	enqueue := func(ps ...readpast.EnqueueParams) []*readpast.Job {
		t.Helper()
		jobs, err := st.Enqueue(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	var s seeded
	// A job that fails for good, with a long stack.
	f := enqueue(readpast.EnqueueParams{Kind: "email", Queue: "mail", Tags: []string{"vip"},
		Payload: []byte(`{"to":"ada@example.com","template":"welcome"}`)})[0]
	s.failed = f.ID
	c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{"mail"}, Worker: "mailer-7", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != f.ID {
		t.Fatalf("claim: %v %v", c, err)
	}
	stack := "goroutine 42 [running]:\nmain.send(0xc000123456)\n\t/srv/mailer/send.go:88 +0x1d\n" + strings.Repeat("main.retryLoop.func1()\n\t/srv/mailer/a_very_long_path_segment_without_any_break_"+strings.Repeat("x", 120)+".go:12\n", 30)
	if errs, err := st.Fail(ctx, []readpast.Failure{{ID: f.ID, Token: c[0].Token, Message: "smtp: connection refused", Stack: stack, Discard: true}}); err != nil || errs[0] != nil {
		t.Fatalf("fail: %v %v", errs, err)
	}
	// Live jobs: mail, images in two groups, one running, one scheduled.
	s.running = enqueue(readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-a", Payload: []byte(`{"image":1}`)})[0].ID
	enqueue(
		readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-a", Payload: []byte(`{"image":2}`)},
		readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-a", Payload: []byte(`{"image":3}`)},
		readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-a", Payload: []byte(`{"image":4}`)},
		readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-b", Payload: []byte(`{"image":5}`)},
		readpast.EnqueueParams{Kind: "resize", Queue: "images", Group: "tenant-b", Payload: []byte(`{"image":6}`)},
	)
	if c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{"images"}, Worker: "resizer-1", Limit: 1, Lease: time.Hour}); err != nil || len(c) != 1 || c[0].ID != s.running {
		t.Fatalf("claim images: %v %v", c, err)
	}
	for i := range 8 {
		enqueue(readpast.EnqueueParams{Kind: "email", Queue: "mail", Payload: []byte(fmt.Sprintf(`{"to":"user%d@example.com"}`, i))})
	}
	s.needle = enqueue(readpast.EnqueueParams{Kind: "email", Queue: "mail", Tags: []string{"vip", "eu"},
		Payload: []byte(`{"to":"grace@example.com","note":"find the Needle"}`)})[0].ID
	s.scheduled = enqueue(readpast.EnqueueParams{Kind: "invoice", Queue: "billing", RunAt: time.Now().Add(2 * time.Hour)})[0].ID
	s.long = enqueue(readpast.EnqueueParams{Kind: "render", Queue: "reports",
		Payload: []byte(`{"blob":"` + strings.Repeat("abcdefghij", 3000) + `","rows":[` + strings.Repeat(`{"a":1,"b":"two"},`, 200) + `{}]}`)})[0].ID
	s.pending = enqueue(readpast.EnqueueParams{Kind: "render", Queue: "reports", Payload: []byte(`{"report":"weekly"}`)})[0].ID
	s.nightlyJob = seedSchedules(t, st)
	return s
}

// seedSchedules puts two schedules whose ticks do not come during the
// test: nightly-report, which made a job at last night's tick (the job's
// id is returned), and hourly-sync, paused.
func seedSchedules(t *testing.T, st testStore) int64 {
	t.Helper()
	ctx := context.Background()
	n, _, err := st.PutSchedule(ctx, readpast.ScheduleParams{Name: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Paris",
		CatchUp: readpast.CatchUpOnce, Job: readpast.EnqueueParams{Kind: "report", Queue: "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	if n.NextRunAt == nil {
		t.Fatalf("schedule without a next run: %+v", n)
	}
	// The run a scheduler made a day before the next tick.
	last := n.NextRunAt.Add(-24 * time.Hour)
	fired, job, err := st.FireSchedule(ctx, readpast.Firing{Name: n.Name, Version: n.Version, Expect: *n.NextRunAt, Tick: &last, Next: n.NextRunAt})
	if err != nil || !fired || job == nil {
		t.Fatalf("fire: %v %v %v", fired, job, err)
	}
	paused := true
	if _, _, err := st.PutSchedule(ctx, readpast.ScheduleParams{Name: "hourly-sync", Cron: "@every 1h",
		Job: readpast.EnqueueParams{Kind: "sync"}, Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	return job.ID
}

func testBrowserLogin(b *browser) {
	b.nav("/jobs")
	if loc := b.location(); !strings.Contains(loc, "/login?next=%2Fjobs") {
		b.t.Fatalf("a page without login went to %s", loc)
	}
	b.shot("login")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"))
	b.submit("form[action='/login'] button", http.StatusUnauthorized)
	b.wantText(".error", "That token is not valid.")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), fullToken))
	b.submit("form[action='/login'] button", http.StatusOK)
	if loc := b.location(); loc != b.base+"/jobs" {
		b.t.Fatalf("after the login: %s, want the page asked for", loc)
	}
	// Chromium kept the Secure cookie over http://127.0.0.1, HttpOnly and
	// SameSite=Strict, out of the page's reach.
	cookies, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{b.base}})
	if err != nil {
		b.t.Fatal(err)
	}
	var found *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == cookieName {
			found = c
		}
	}
	if found == nil || !found.Secure || !found.HTTPOnly || found.SameSite != network.CookieSameSiteStrict || found.Path != "/" {
		b.t.Fatalf("login cookie: %+v", found)
	}
	if doc := b.eval(`document.cookie`); strings.Contains(doc, "readpast") {
		b.t.Fatalf("the page can read the login cookie: %q", doc)
	}
}

func testBrowserOverview(b *browser, st testStore) {
	b.nav("/")
	b.waitVisible("#total-pending")
	qs, err := st.QueueSummaries(context.Background(), time.Now().Add(-time.Hour))
	if err != nil {
		b.t.Fatal(err)
	}
	var pending int64
	for _, q := range qs {
		pending += q.Pending
	}
	b.wantText("#total-pending", count(pending))
	b.wantText("#total-running", "1")
	b.wantText("#queue-images", "images")
	b.wantText("#queue-images", "active")
	b.wantText("#queue-mail .bad", "1") // the failed job
	b.wantText(".groups tbody tr:first-child", "tenant-a")
	b.wantText(".groups tbody tr:first-child", "1") // running
	// The charts drew the hour of history.
	if n := b.evalInt(`document.querySelectorAll('#chart-throughput rect.succeeded').length`); n < 50 {
		b.t.Errorf("throughput chart: %d bars of completed jobs", n)
	}
	if n := b.evalInt(`document.querySelectorAll('#chart-throughput rect.failed').length`); n < 5 {
		b.t.Errorf("throughput chart: %d bars of failed jobs", n)
	}
	if n := b.evalInt(`document.querySelectorAll('#chart-latency polyline.p99').length`); n < 1 {
		b.t.Errorf("latency chart: no p99 line")
	}
	b.checkLabels()
	b.shot("overview")
	if *updateScreenshots && b.name == "postgres" {
		shot := b.screenshot()
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "overview.png"), shot, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}

	// Live refresh: new jobs show up without a reload.
	b.eval(`window.readpastMarker = 'same page'`)
	if _, err := st.Enqueue(context.Background(), []readpast.EnqueueParams{
		{Kind: "email", Queue: "mail"}, {Kind: "email", Queue: "mail"}, {Kind: "email", Queue: "mail"}}); err != nil {
		b.t.Fatal(err)
	}
	b.waitText("#total-pending", count(pending+3), 15*time.Second)
	if m := b.eval(`window.readpastMarker || ''`); m != "same page" {
		b.t.Fatal("the overview reloaded instead of refreshing in place")
	}
	if n := b.evalInt(`Number(document.getElementById('live').dataset.refreshes || 0)`); n < 1 {
		b.t.Fatal("no live refresh counted")
	}
}

func testBrowserJobs(b *browser, bk *backend, s seeded) {
	b.nav("/")
	b.click("nav a[href='/jobs']")
	b.waitVisible("table.jobs")
	if n := b.evalInt(`document.querySelectorAll('table.jobs tbody tr').length`); n != pageSize {
		b.t.Fatalf("first page: %d rows, want %d", n, pageSize)
	}
	// Cursor paging: the next page goes on below the last id.
	last := b.evalInt(`Number(document.querySelector('table.jobs tbody tr:last-child').id.slice(4))`)
	b.click("#older")
	b.waitVisible("table.jobs")
	if first := b.evalInt(`Number(document.querySelector('table.jobs tbody tr:first-child').id.slice(4))`); first >= last || first < last-5 {
		b.t.Fatalf("the next page starts at %d after %d", first, last)
	}

	// Filters, through the form.
	filter := func(queue, state, kind, group, text string) []int64 {
		b.t.Helper()
		b.nav("/jobs")
		for sel, v := range map[string]string{"#f-queue": queue, "#f-kind": kind, "#f-group": group, "#f-q": text} {
			if v != "" {
				b.do(chromedp.SetValue(chromedp.CSS(sel), v))
			}
		}
		if state != "" {
			b.do(chromedp.SetValue(chromedp.CSS("#f-state"), state))
		}
		b.submit("form.filters button[type=submit]", http.StatusOK)
		return b.rowIDs()
	}
	failedMail := bk.ids(b.t, `queue = 'mail' AND state = 'failed'`)
	if got := filter("mail", "failed", "", "", ""); !slices.Equal(got, failedMail) || got[0] != s.failed {
		b.t.Errorf("mail, failed: %v, want %v starting with %d", got, failedMail, s.failed)
	}
	if got := filter("", "", "", "tenant-a", ""); len(got) != 4 {
		b.t.Errorf("group tenant-a: %v", got)
	}
	if got := filter("", "running", "resize", "", ""); len(got) != 1 || got[0] != s.running {
		b.t.Errorf("running resize: %v, want [%d]", got, s.running)
	}
	if got := filter("", "", "", "", "needle"); len(got) != 1 || got[0] != s.needle {
		b.t.Errorf("text in payload: %v, want [%d]", got, s.needle)
	}
	if got := filter("", "", "", "", "connection refused"); len(got) != 1 || got[0] != s.failed {
		b.t.Errorf("text in error: %v, want [%d]", got, s.failed)
	}
	b.wantText("table.jobs", "smtp: connection refused")
	// The tag filter.
	b.nav("/jobs")
	b.do(chromedp.SetValue(chromedp.CSS("#f-tag"), "vip"))
	b.submit("form.filters button[type=submit]", http.StatusOK)
	if got := b.rowIDs(); !slices.Equal(got, []int64{s.needle, s.failed}) {
		b.t.Errorf("tag vip: %v, want [%d %d]", got, s.needle, s.failed)
	}
	if got := b.location(); !strings.Contains(got, "tag=vip") {
		b.t.Errorf("the tag filter is not in the address: %s", got)
	}
	b.checkLabels()
	b.shot("jobs-search")
	if got := filter("nosuchqueue", "", "", "", ""); len(got) != 0 {
		b.t.Errorf("a queue with no job: %v", got)
	}
	b.wantText("#no-jobs", "No job matches")
	filter("mail", "", "", "", "")
	b.shot("jobs")
}

func testBrowserJob(b *browser, s seeded) {
	b.nav("/jobs?q=connection+refused")
	b.click(fmt.Sprintf("a[href='/jobs/%d']", s.failed))
	b.waitVisible("#attempts-h")
	b.wantText("h1", fmt.Sprintf("Job %d", s.failed))
	b.wantText("h1 .state", "failed")
	b.wantText(".facts", "mailer-7")
	b.wantText(".facts", "1 of 25")
	b.wantText("pre.text", `"to": "ada@example.com"`)
	b.wantText(".facts .tags", "vip")
	b.wantText("#attempt-1", "smtp: connection refused")
	b.toggle("#attempt-1 summary")
	b.wantText("#attempt-1 details pre", "/srv/mailer/send.go:88")
	b.shot("job-failed")

	b.nav(fmt.Sprintf("/jobs/%d", s.running))
	b.wantText(".facts", "resizer-1")
	b.wantText(".facts", "Lease expires")
	if !strings.Contains(b.text(".facts"), "UTC (in ") {
		b.t.Errorf("the lease expiry of a running job is not shown ahead: %s", b.text(".facts"))
	}
	// A long payload and a long stack stay inside the page.
	b.nav(fmt.Sprintf("/jobs/%d", s.long))
	b.noOverflow()
	b.shot("job-long-payload")
}

func testBrowserActions(b *browser, st testStore, s seeded) {
	ctx := context.Background()
	get := func(id int64) *readpast.Job {
		b.t.Helper()
		j, err := st.Get(ctx, id)
		if err != nil {
			b.t.Fatal(err)
		}
		return j
	}
	act := func(id int64, action, flash string) {
		b.t.Helper()
		b.nav(fmt.Sprintf("/jobs/%d", id))
		b.submit("#action-"+action, http.StatusOK)
		b.wantText(".flash", flash)
	}

	act(s.failed, "retry", "Job retried")
	if j := get(s.failed); j.State != readpast.StatePending || j.Attempt != 0 {
		b.t.Fatalf("after retry: %s, attempt %d", j.State, j.Attempt)
	}
	b.wantText("h1 .state", "pending")

	act(s.pending, "cancel", "Job cancelled")
	if j := get(s.pending); j.State != readpast.StateCancelled {
		b.t.Fatalf("after cancel: %s", j.State)
	}
	b.wantText("h1 .state", "cancelled")
	act(s.pending, "retry", "Job retried")
	if j := get(s.pending); j.State != readpast.StatePending {
		b.t.Fatalf("after retrying a cancelled job: %s", j.State)
	}

	act(s.running, "cancel", "Job cancelled")
	if j := get(s.running); j.State != readpast.StateCancelled {
		b.t.Fatalf("after cancelling a running job: %s", j.State)
	}
	// Delete a finished job: back to the list, and it is gone.
	act(s.running, "delete", "Job deleted")
	if loc := b.location(); loc != b.base+"/jobs?done=delete" {
		b.t.Fatalf("after delete: %s", loc)
	}
	if _, err := st.Get(ctx, s.running); !errors.Is(err, readpast.ErrNotFound) {
		b.t.Fatalf("after delete, Get: %v", err)
	}
	b.nav(fmt.Sprintf("/jobs/%d", s.pending))
	if n := b.evalInt(`document.querySelectorAll('#action-delete').length`); n != 0 {
		b.t.Fatal("a pending job offers to be deleted")
	}

	b.nav(fmt.Sprintf("/jobs/%d", s.scheduled))
	b.wantText("#action-run", "Run now")
	before := time.Now()
	act(s.scheduled, "run", "Job made due now")
	if j := get(s.scheduled); j.State != readpast.StatePending || j.RunAt.After(before.Add(time.Minute)) {
		b.t.Fatalf("after run now: %s at %v", j.State, j.RunAt)
	}
	if n := b.evalInt(`document.querySelectorAll('#action-run').length`); n != 0 {
		b.t.Fatal("a due job still offers to run now")
	}

	// Pause and resume a queue from the overview.
	paused := func(name string) bool {
		b.t.Helper()
		qs, err := st.Queues(ctx)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == name {
				return q.Paused
			}
		}
		b.t.Fatalf("no queue %s", name)
		return false
	}
	b.nav("/")
	b.submit("button[aria-label='Pause queue reports']", http.StatusOK)
	b.wantText(".flash", "Queue paused")
	b.wantText("#queue-reports", "paused")
	if !paused("reports") {
		b.t.Fatal("the queue is not paused")
	}
	b.shot("overview-paused")
	b.submit("button[aria-label='Resume queue reports']", http.StatusOK)
	b.wantText(".flash", "Queue resumed")
	b.wantText("#queue-reports", "active")
	if paused("reports") {
		b.t.Fatal("the queue is still paused")
	}
}

// testBrowserSchedules: the schedules page shows each schedule with its
// next and last run, and pauses and resumes one.
// testBrowserBulk: a selection's bulk actions, each with its count and a
// confirmation, cancel then delete the jobs that match and nothing else.
func testBrowserBulk(b *browser, st testStore) {
	ctx := context.Background()
	var ps []readpast.EnqueueParams
	for i := range 3 {
		ps = append(ps, readpast.EnqueueParams{Kind: "export", Queue: "bulkq", Tags: []string{"batch-7"}, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	ps = append(ps, readpast.EnqueueParams{Kind: "export", Queue: "bulkq", Tags: []string{"batch-8"}})
	jobs, err := st.Enqueue(ctx, ps)
	if err != nil {
		b.t.Fatal(err)
	}
	other := jobs[3].ID
	state := func(id int64) readpast.JobState {
		b.t.Helper()
		j, err := st.Get(ctx, id)
		if errors.Is(err, readpast.ErrNotFound) {
			return "deleted"
		}
		if err != nil {
			b.t.Fatal(err)
		}
		return j.State
	}

	// Without a filter there is no bulk action.
	b.nav("/jobs")
	if n := b.evalInt(`document.querySelectorAll('.bulk').length`); n != 0 {
		b.t.Fatal("the unfiltered job list offers bulk actions")
	}
	b.nav("/jobs?queue=bulkq&tag=batch-7")
	b.waitVisible("#bulk-cancel")
	b.shot("bulk-selection")
	b.submit("#bulk-cancel", http.StatusOK)
	b.wantText("#bulk-count", "3")
	b.shot("bulk-confirm")
	for _, j := range jobs {
		if got := state(j.ID); got != readpast.StatePending {
			b.t.Fatalf("job %d is %s before the confirmation", j.ID, got)
		}
	}
	b.submit("#bulk-confirm", http.StatusOK)
	b.wantText(".flash", "3 jobs cancelled")
	for _, j := range jobs[:3] {
		if got := state(j.ID); got != readpast.StateCancelled {
			b.t.Fatalf("after the bulk cancel job %d is %s", j.ID, got)
		}
	}
	if got := state(other); got != readpast.StatePending {
		b.t.Fatalf("the bulk cancel reached job %d of another tag: %s", other, got)
	}
	// The same selection now offers to retry or delete them.
	b.nav("/jobs?queue=bulkq&tag=batch-7&state=cancelled")
	if n := b.evalInt(`document.querySelectorAll('#bulk-cancel').length`); n != 0 {
		b.t.Fatal("a selection of cancelled jobs offers to cancel them")
	}
	b.submit("#bulk-delete", http.StatusOK)
	b.wantText("#bulk-count", "3")
	b.submit("#bulk-confirm", http.StatusOK)
	b.wantText(".flash", "3 jobs deleted")
	for _, j := range jobs[:3] {
		if got := state(j.ID); got != "deleted" {
			b.t.Fatalf("after the bulk delete job %d is %s", j.ID, got)
		}
	}
	if got := state(other); got != readpast.StatePending {
		b.t.Fatalf("the bulk delete reached job %d: %s", other, got)
	}
}

func testBrowserSchedules(b *browser, st testStore, s seeded) {
	ctx := context.Background()
	schedule := func(name string) *readpast.Schedule {
		b.t.Helper()
		sc, err := st.GetSchedule(ctx, name)
		if err != nil {
			b.t.Fatal(err)
		}
		return sc
	}
	b.nav("/")
	b.click("nav a[href='/schedules']")
	b.waitVisible("table.schedules")
	row := "#schedule-nightly-report"
	b.wantText(row, "active")
	b.wantText(row, "0 3 * * *")
	b.wantText(row, "Europe/Paris")
	b.wantText(row, "report in nightly")
	n := schedule("nightly-report")
	b.wantText(row+" td.next", timestamp(*n.NextRunAt))
	b.wantText(row+" td.next", "(in ")
	b.wantText(row+" td.last", timestamp(*n.LastRunAt))
	b.wantText(row+" td.last", fmt.Sprintf("job %d", s.nightlyJob))
	b.wantText(row, "one job for all")
	b.wantText("#schedule-hourly-sync", "paused")
	b.wantText("#schedule-hourly-sync td.next", "—")
	b.wantText("#schedule-hourly-sync td.last", "never")
	b.checkLabels()
	b.shot("schedules")

	b.submit("button[aria-label='Pause schedule nightly-report']", http.StatusOK)
	b.wantText(".flash", "Schedule paused")
	b.wantText(row, "paused")
	if sc := schedule("nightly-report"); !sc.Paused || sc.NextRunAt != nil {
		b.t.Fatalf("after pause: paused %v, next %v", sc.Paused, sc.NextRunAt)
	}
	b.shot("schedule-paused")
	b.submit("button[aria-label='Resume schedule nightly-report']", http.StatusOK)
	b.wantText(".flash", "Schedule resumed")
	b.wantText(row, "active")
	if sc := schedule("nightly-report"); sc.Paused || sc.NextRunAt == nil || !sc.NextRunAt.Equal(*n.NextRunAt) {
		b.t.Fatalf("after resume: paused %v, next %v, want %v", sc.Paused, sc.NextRunAt, n.NextRunAt)
	}
	// The last run's job is a link to it.
	b.click(fmt.Sprintf("%s td.last a[href='/jobs/%d']", row, s.nightlyJob))
	b.wantText("h1", fmt.Sprintf("Job %d", s.nightlyJob))
	b.wantText(".facts", "nightly")
}

// testBrowserKeyboard: the first Tab reaches the skip link, which moves
// the focus to the content; links and buttons work from the keyboard.
func testBrowserKeyboard(b *browser, st testStore) {
	b.nav("/")
	b.waitVisible("#total-pending")
	b.do(chromedp.KeyEvent(kb.Tab))
	if got := b.eval(`document.activeElement.className`); got != "skip" {
		b.t.Fatalf("the first Tab focuses %q, want the skip link", got)
	}
	b.do(chromedp.KeyEvent(kb.Enter))
	if got := b.eval(`document.activeElement.id`); got != "main" {
		b.t.Fatalf("the skip link moves the focus to %q", got)
	}
	// Tab on to the pause button of the mail queue and press Enter.
	for range 200 {
		b.do(chromedp.KeyEvent(kb.Tab))
		if b.eval(`document.activeElement.getAttribute('aria-label') || ''`) == "Pause queue mail" {
			break
		}
	}
	if b.eval(`document.activeElement.getAttribute('aria-label') || ''`) != "Pause queue mail" {
		b.t.Fatal("Tab never reached the pause button of queue mail")
	}
	b.load(chromedp.KeyEvent(kb.Enter))
	b.wantText(".flash", "Queue paused")
	ctx := context.Background()
	qs, err := st.Queues(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == "mail" && !q.Paused {
			b.t.Fatal("Enter on the pause button did not pause the queue")
		}
	}
	if err := st.ResumeQueue(ctx, "mail"); err != nil {
		b.t.Fatal(err)
	}
	// A live refresh keeps the focus on a link that has no id, found
	// again by its place (before, the focus went back to the page).
	focused := b.eval(`(() => {
		for (const e of document.querySelectorAll('#live a[href]')) {
			if (!e.id && !e.getAttribute('data-focus')) { e.focus(); return e.getAttribute('href'); }
		}
		return '';
	})()`)
	if focused == "" {
		b.t.Fatal("the overview's live part has no link without an id")
	}
	before := b.evalInt(`Number(document.getElementById('live').dataset.refreshes || 0)`)
	for deadline := time.Now().Add(15 * time.Second); b.evalInt(`Number(document.getElementById('live').dataset.refreshes || 0)`) == before; {
		if time.Now().After(deadline) {
			b.t.Fatal("no live refresh within 15 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := b.eval(`document.activeElement.getAttribute('href') || document.activeElement.tagName`); got != focused {
		b.t.Fatalf("after a live refresh the focus is on %q, want the link to %q", got, focused)
	}
}

// testBrowserPhoneDark: at a phone's width nothing overflows the page; in
// dark mode the page is dark.
func testBrowserPhoneDark(b *browser, s seeded) {
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	for _, path := range []string{"/", "/jobs", "/schedules", fmt.Sprintf("/jobs/%d", s.failed), fmt.Sprintf("/jobs/%d", s.long)} {
		b.nav(path)
		b.noOverflow()
	}
	b.nav("/")
	b.waitVisible("#total-pending")
	b.shot("overview-phone")
	b.nav(fmt.Sprintf("/jobs/%d", s.long))
	b.shot("job-long-payload-phone")
	b.do(chromedp.ResetViewport())
	b.dark(true)
	b.nav("/")
	b.waitVisible("#total-pending")
	if bg := b.eval(`getComputedStyle(document.body).backgroundColor`); bg != "rgb(13, 17, 23)" {
		b.t.Errorf("dark mode background: %s", bg)
	}
	b.shot("overview-dark")
	b.nav(fmt.Sprintf("/jobs/%d", s.failed))
	b.shot("job-dark")
	b.dark(false)
}

// testBrowserForgery: a page on another origin makes the logged-in browser
// post a form to the dashboard. From the same site (another port of
// 127.0.0.1) the login cookie goes along, and cross-origin protection
// refuses it; from another site (localhost) the cookie stays behind too.
// The job is untouched either way.
func testBrowserForgery(b *browser, st testStore, s seeded) {
	ctx := context.Background()
	// The forms the evil page makes, and the check that nothing changed.
	targets := []struct {
		path      string
		unchanged func() error
	}{
		{fmt.Sprintf("/jobs/%d/cancel", s.pending), func() error {
			if j, err := st.Get(ctx, s.pending); err != nil || j.State != readpast.StatePending {
				return fmt.Errorf("after a forged cancel the job is %v (%v)", j.State, err)
			}
			return nil
		}},
		{"/schedules/nightly-report/pause", func() error {
			if sc, err := st.GetSchedule(ctx, "nightly-report"); err != nil || sc.Paused {
				return fmt.Errorf("after a forged pause the schedule is paused: %v (%v)", sc.Paused, err)
			}
			return nil
		}},
		{"/queues/mail/pause", func() error {
			qs, err := st.Queues(ctx)
			for _, q := range qs {
				if q.Name == "mail" && q.Paused {
					return errors.New("after a forged pause the queue is paused")
				}
			}
			return err
		}},
	}
	evil := http.NewServeMux()
	evil.HandleFunc("GET /{target}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.PathValue("target"))
		if err != nil || i < 0 || i >= len(targets) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>evil</title>
<form id="f" method="post" action="%s%s"><input name="csrf" value="guessed"><input name="next" value="/"></form>
<script>document.getElementById('f').submit()</script>`, b.base, targets[i].path)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.t.Fatal(err)
	}
	hs := &http.Server{Handler: evil}
	go hs.Serve(ln)
	defer hs.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, origin := range []struct{ name, host string }{
		{"same site", "127.0.0.1"},
		{"cross site", "localhost"},
	} {
		for i, target := range targets {
			resp := b.load(chromedp.Navigate(fmt.Sprintf("http://%s:%d/%d", origin.host, port, i)))
			// The form posts itself: wait for the dashboard's answer.
			b.waitLocation(b.base + target.path)
			b.waitVisible("main")
			status := b.evalInt(`performance.getEntriesByType('navigation')[0].responseStatus || 0`)
			if status != http.StatusForbidden && status != http.StatusUnauthorized {
				b.t.Errorf("%s, %s: the forged post was answered %d (evil page %d)", origin.name, target.path, status, resp.Status)
			}
			if i == 0 {
				b.shot("forged-post-" + strings.ReplaceAll(origin.name, " ", "-"))
			}
			if err := target.unchanged(); err != nil {
				b.t.Fatalf("%s, %s: %v", origin.name, target.path, err)
			}
		}
	}
}

// testBrowserReadOnly: a read-only login sees the pages without any action
// and the server refuses the actions it makes up.
func testBrowserReadOnly(b *browser, st testStore, s seeded) {
	b.nav("/login")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), readToken))
	b.submit("form[action='/login'] button", http.StatusOK)
	b.waitVisible("#total-pending")
	b.wantText(".badge.readonly", "read-only")
	if n := b.evalInt(`document.querySelectorAll('#live form').length`); n != 0 {
		b.t.Errorf("read-only overview has %d action forms", n)
	}
	b.shot("overview-readonly")
	b.nav("/schedules")
	b.waitVisible("table.schedules")
	if n := b.evalInt(`document.querySelectorAll('table.schedules form, table.schedules button').length`); n != 0 {
		b.t.Errorf("read-only schedules page has %d actions", n)
	}
	for _, id := range []int64{s.pending, s.failed} {
		b.nav(fmt.Sprintf("/jobs/%d", id))
		if n := b.evalInt(`document.querySelectorAll('.actions, [id^=action-]').length`); n != 0 {
			b.t.Errorf("read-only job page %d shows %d actions", id, n)
		}
	}
	// Make the forms the pages do not offer, with this login's own form
	// token (the logout form's), and post them.
	post := func(path string) {
		b.t.Helper()
		b.nav("/")
		resp := b.load(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(function () {
  var f = document.createElement('form');
  f.method = 'post';
  f.action = %q;
  var c = document.querySelector('input[name=csrf]').cloneNode();
  f.appendChild(c);
  document.body.appendChild(f);
  f.submit();
})()`, path)))
		if resp.Status != http.StatusForbidden || resp.URL != b.base+path {
			b.t.Errorf("a read-only %s was answered %d (%s)", path, resp.Status, resp.URL)
		}
		b.wantText(".error", "may only look")
	}
	ctx := context.Background()
	post(fmt.Sprintf("/jobs/%d/cancel", s.pending))
	b.shot("readonly-refused")
	if j, err := st.Get(ctx, s.pending); err != nil || j.State != readpast.StatePending {
		b.t.Fatalf("a read-only login changed the job: %v (%v)", j.State, err)
	}
	post("/schedules/nightly-report/pause")
	if sc, err := st.GetSchedule(ctx, "nightly-report"); err != nil || sc.Paused {
		b.t.Fatalf("a read-only login paused the schedule: %v (%v)", sc.Paused, err)
	}
	b.nav("/jobs?queue=images")
	b.waitVisible("table.jobs")
	if n := b.evalInt(`document.querySelectorAll('.bulk, [id^=bulk-]').length`); n != 0 {
		b.t.Errorf("a read-only job list offers %d bulk actions", n)
	}
	post("/bulk/cancel")
	if j, err := st.Get(ctx, s.pending); err != nil || j.State != readpast.StatePending {
		b.t.Fatalf("a read-only bulk cancel changed a job: %v (%v)", j.State, err)
	}
	post("/queues/mail/pause")
	qs, err := st.Queues(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Paused {
			b.t.Fatalf("a read-only login paused queue %s", q.Name)
		}
	}
}

func testBrowserLogout(b *browser) {
	b.nav("/")
	b.submit("form[action='/logout'] button", http.StatusOK)
	if loc := b.location(); !strings.HasPrefix(loc, b.base+"/login") {
		b.t.Fatalf("after logout: %s", loc)
	}
	b.nav("/")
	if loc := b.location(); !strings.HasPrefix(loc, b.base+"/login") {
		b.t.Fatalf("a page after logout: %s", loc)
	}
}

// TestBrowserAuthOff: on SQLite with no token, the dashboard needs no
// login and its actions still work (and still need the form token).
func TestBrowserAuthOff(t *testing.T) {
	chrome := chromiumPath(t)
	bin := readpastBin.Path(t)
	db := filepath.Join(t.TempDir(), "off.db")
	srv := startServe(t, bin, "--database-url", db)
	b := newBrowser(t, chrome, srv.base, "auth-off")
	res, err := http.Post(srv.base+"/v1/jobs", "application/json", strings.NewReader(`{"kind":"hello","queue":"solo"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	b.nav("/")
	b.waitVisible("#queue-solo")
	if n := b.evalInt(`document.querySelectorAll('form[action="/logout"]').length`); n != 0 {
		t.Fatal("a logout button with auth off")
	}
	b.submit("button[aria-label='Pause queue solo']", http.StatusOK)
	b.wantText("#queue-solo", "paused")
	b.shot("auth-off-paused")
	res, err = http.Get(srv.base + "/v1/queues")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Queues []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"queues"`
	}
	err = json.NewDecoder(res.Body).Decode(&body)
	res.Body.Close()
	if err != nil || len(body.Queues) != 1 || !body.Queues[0].Paused {
		t.Fatalf("queues after the pause: %+v, %v", body, err)
	}
}

// chromiumPath finds Chromium: $READPAST_CHROMIUM, else chromium,
// chromium-browser or google-chrome on the PATH. Without it the test is
// skipped, or fails under CI=true.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser")
	}
	if p := os.Getenv("READPAST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if pgtest.InCI() {
		t.Fatal("Chromium is not installed (apt-get install chromium); under CI=true the browser tests cannot be skipped")
	}
	t.Skip("Chromium is not installed (apt-get install chromium, or set READPAST_CHROMIUM)")
	return ""
}

// readpastBin is the readpast command the browser tests serve, built
// once (internal/testbin) and removed by TestMain.
var readpastBin testbin.Readpast

// served is a running `readpast serve`.
type served struct {
	base string
}

// startServe starts `readpast serve` on a free loopback port, waits until
// it listens, and stops it (SIGTERM, then a check of its exit) at the end
// of the test.
func startServe(t *testing.T, bin string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "READPAST_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	var mu sync.Mutex
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			log.WriteString(line + "\n")
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		done <- cmd.Wait()
	}()
	logs := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("readpast serve exited with %v after SIGTERM\n%s", err, logs())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("readpast serve did not stop after SIGTERM\n%s", logs())
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs())
		}
	})
	select {
	case a := <-addr:
		return &served{base: "http://" + a}
	case err := <-done:
		t.Fatalf("readpast serve exited: %v\n%s", err, logs())
	case <-time.After(time.Minute):
		t.Fatalf("readpast serve did not start\n%s", logs())
	}
	return nil
}

// browser drives one Chromium tab, failing its test on any error.
type browser struct {
	t       *testing.T
	ctx     context.Context
	alloc   context.Context
	name    string // of the backend
	base    string
	shots   string
	shotSeq int
}

// newBrowser starts headless Chromium, closed at the end of the test. Its
// screenshots go to screenshots/name in $READPAST_ARTIFACTS, or in a
// temporary directory.
func newBrowser(t *testing.T, chrome, base, name string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	shots := os.Getenv(envArtifacts)
	if shots == "" {
		shots = t.TempDir()
	}
	shots = filepath.Join(shots, "screenshots", name)
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	return &browser{t: t, ctx: ctx, alloc: ctx, name: name, base: base, shots: shots}
}

// other is a second tab with cookies of its own (a new browser context),
// for another login.
func (b *browser) other(t *testing.T) *browser {
	ctx, cancel := chromedp.NewContext(b.alloc, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, alloc: b.alloc, name: b.name, base: b.base, shots: b.shots, shotSeq: 100}
}

// step bounds one browser action (generous: CI machines may be busy).
const step = 45 * time.Second

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.location())
	}
}

func (b *browser) nav(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
}

// submit clicks a button or link that loads a page, waits for it, and
// checks its status.
func (b *browser) submit(sel string, status int64) {
	b.t.Helper()
	resp, err := b.clickLoad(sel)
	if err != nil {
		b.t.Fatalf("browser: clicking %s: %v", sel, err)
	}
	if resp.Status != status {
		b.t.Fatalf("clicking %s loaded %s with status %d, want %d", sel, resp.URL, resp.Status, status)
	}
}

// click clicks a link or button that loads a page, and waits for it.
func (b *browser) click(sel string) {
	b.t.Helper()
	if _, err := b.clickLoad(sel); err != nil {
		b.t.Fatalf("browser: clicking %s: %v", sel, err)
	}
}

// clickLoad clicks sel and waits for the page it loads. A live refresh
// may replace the node between finding it and clicking it (chromedp:
// "Could not find node with given id"): nothing was clicked then, and the
// click is tried again on the new node.
func (b *browser) clickLoad(sel string) (*network.Response, error) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, step)
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
		cancel()
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "Could not find node") {
			return resp, err
		}
	}
}

// load runs an action that loads a page, waits for it and returns its
// response.
func (b *browser) load(a chromedp.Action[chromedp.Void]) *network.Response {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.location())
	}
	return resp
}

// toggle clicks an element that changes the page in place (no load).
func (b *browser) toggle(sel string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (b *browser) location() string {
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		return "?"
	}
	return loc
}

// waitLocation waits until the tab shows url, loaded.
func (b *browser) waitLocation(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	js, _ := json.Marshal(url)
	for {
		// The poll fails when the page it runs in navigates away: poll
		// again in the next one.
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`location.href === %s && document.readyState === 'complete'`, js),
			chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			b.t.Fatalf("the tab never showed %s (it shows %s): %v", url, b.location(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("browser: text of %s: %v (at %s)", sel, err, b.location())
	}
	return s
}

// wantText fails unless the element's text has want in it. It looks
// again for up to 10 seconds: the overview's live refresh may be swapping
// the element for a new one just then, or a navigation may still be
// replacing the page (a look then fails, and the next one is made).
func (b *browser) wantText(sel, want string) {
	b.t.Helper()
	js, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	probe := fmt.Sprintf(`(function () {
  var e = document.querySelector(%[1]s);
  return !!e && (e.innerText.indexOf(%[2]s) >= 0 || e.textContent.replace(/\s+/g, ' ').indexOf(%[2]s) >= 0);
})()`, js, w)
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		found, err := chromedp.Run(ctx, chromedp.Evaluate[bool](probe))
		cancel()
		if err == nil && found {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s shows %q, want %q in it (at %s; last look: %v)", sel, b.text(sel), want, b.location(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the element's text is want.
func (b *browser) waitText(sel, want string, d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	js, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`(document.querySelector(%s) || {}).textContent === %s`, js, w),
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		b.t.Fatalf("%s never showed %q (it shows %q): %v", sel, want, b.text(sel), err)
	}
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", js, err)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func (b *browser) evalInt(js string) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](js))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", js, err)
	}
	return int64(v)
}

// rowIDs returns the ids of the job list's rows.
func (b *browser) rowIDs() []int64 {
	b.t.Helper()
	var out []int64
	for _, f := range strings.Fields(b.eval(`Array.from(document.querySelectorAll('table.jobs tbody tr')).map(r => r.id.slice(4)).join(' ')`)) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// noOverflow fails unless the page fits its width: long payloads, stacks
// and names wrap or scroll inside their boxes.
func (b *browser) noOverflow() {
	b.t.Helper()
	b.waitVisible("main")
	if over := b.evalInt(`document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
		b.t.Errorf("%s is %d px wider than the window", b.location(), over)
	}
}

// checkLabels fails when a form control has no label or accessible name,
// or a chart no description.
func (b *browser) checkLabels() {
	b.t.Helper()
	bad := b.eval(`Array.from(document.querySelectorAll('input:not([type=hidden]), select, button, svg[role=img]')).filter(function (el) {
  if (el.tagName === 'BUTTON') return !(el.textContent.trim() || el.getAttribute('aria-label'));
  if (el.tagName.toLowerCase() === 'svg') return !el.getAttribute('aria-label');
  return !(el.labels && el.labels.length) && !el.getAttribute('aria-label');
}).map(function (el) { return el.outerHTML.slice(0, 80); }).join('\n')`)
	if bad != "" {
		b.t.Errorf("controls without an accessible name on %s:\n%s", b.location(), bad)
	}
}

// dark turns the emulated dark color scheme on or off.
func (b *browser) dark(on bool) {
	b.t.Helper()
	v := "light"
	if on {
		v = "dark"
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
		b.t.Fatal(err)
	}
}

// screenshot captures the whole page as PNG.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}

// shot saves a screenshot of the whole page as an artifact.
func (b *browser) shot(name string) {
	b.t.Helper()
	b.shotSeq++
	path := filepath.Join(b.shots, fmt.Sprintf("%03d-%s.png", b.shotSeq, name))
	if err := os.WriteFile(path, b.screenshot(), 0o644); err != nil {
		b.t.Fatal(err)
	}
}
