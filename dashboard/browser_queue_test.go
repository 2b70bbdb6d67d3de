package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/readpast/readpast"
)

// queueSeeded names the jobs of the queue page's test.
type queueSeeded struct {
	// oldest is the queue's due job that has waited longest; retrying
	// failed an attempt and waits to run again.
	oldest, retrying int64
}

// seedQueuePage fills queue payments: fifty minutes of finished jobs
// (for its charts), due jobs in two keys of the template merchant:*
// (which has a limit), one of them running, one job due in an hour, and
// one retrying after a failed attempt.
func seedQueuePage(b *browser, bk *backend) queueSeeded {
	b.t.Helper()
	ctx := context.Background()
	st := bk.st
	now := time.Now()
	var rows []historyRow
	for i, r := range hourOfHistory(now) {
		// A third of an hour's traffic, well inside the charts' window.
		if i%3 == 0 && r.finished.After(now.Add(-50*time.Minute)) {
			r.queue, r.kind = "payments", "charge"
			rows = append(rows, r)
		}
	}
	bk.addHistory(b.t, rows)
	if _, err := st.PutLimit(ctx, readpast.Limit{Key: "merchant:*", Concurrency: 2, Rate: 60, Per: time.Minute}); err != nil {
		b.t.Fatal(err)
	}
	enqueue := func(ps ...readpast.EnqueueParams) []*readpast.Job {
		b.t.Helper()
		jobs, err := st.Enqueue(ctx, ps)
		if err != nil {
			b.t.Fatal(err)
		}
		return jobs
	}
	var s queueSeeded
	// The job that fails an attempt, alone in the queue while it runs.
	s.retrying = enqueue(readpast.EnqueueParams{Kind: "charge", Queue: "payments", MaxAttempts: 5, Payload: []byte(`{"order":77}`)})[0].ID
	c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{"payments"}, Worker: "payer-1", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != s.retrying {
		b.t.Fatalf("claim payments: %v %v", c, err)
	}
	if errs, err := st.Fail(ctx, []readpast.Failure{{ID: s.retrying, Token: c[0].Token, Message: "card network timed out",
		RetryAt: now.Add(15 * time.Minute)}}); err != nil || errs[0] != nil {
		b.t.Fatalf("fail: %v %v", errs, err)
	}
	s.oldest = enqueue(readpast.EnqueueParams{Kind: "charge", Queue: "payments", Group: "merchant:1", RunAt: now.Add(-30 * time.Minute)})[0].ID
	enqueue(
		readpast.EnqueueParams{Kind: "charge", Queue: "payments", Group: "merchant:1"},
		readpast.EnqueueParams{Kind: "charge", Queue: "payments", Group: "merchant:1"},
		readpast.EnqueueParams{Kind: "charge", Queue: "payments", Group: "merchant:1"},
		readpast.EnqueueParams{Kind: "refund", Queue: "payments", Group: "merchant:2"},
		readpast.EnqueueParams{Kind: "charge", Queue: "payments"},
		readpast.EnqueueParams{Kind: "payout", Queue: "payments", RunAt: now.Add(time.Hour)},
	)
	// The job that runs comes first in claim order.
	run := enqueue(readpast.EnqueueParams{Kind: "refund", Queue: "payments", Group: "merchant:2", Priority: -1})[0]
	if c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{"payments"}, Worker: "payer-2", Limit: 1, Lease: time.Hour}); err != nil || len(c) != 1 || c[0].ID != run.ID {
		b.t.Fatalf("claim payments: %v %v", c, err)
	}
	return s
}

// testBrowserQueuePage: a queue's name on the overview leads to its page,
// whose counts are the store's, whose charts draw its hour, which shows
// its oldest due job and its busiest groups with the limits that govern
// them, and which pauses and resumes the queue. An unknown queue is a 404.
func testBrowserQueuePage(b *browser, bk *backend) {
	ctx := context.Background()
	st := bk.st
	s := seedQueuePage(b, bk)
	desktop(b)
	b.nav("/")
	b.waitVisible("#queue-payments")
	b.click("#queue-payments th a")
	if loc := b.location(); loc != b.base+"/queues/payments" {
		b.t.Fatalf("the queue's link on the overview went to %s", loc)
	}
	b.wantText("h1", "Queue payments")
	summary := func(since time.Time) readpast.QueueSummary {
		b.t.Helper()
		qs, err := st.QueueSummaries(ctx, since)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "payments" {
				return q
			}
		}
		b.t.Fatal("no queue payments in the store's summaries")
		return readpast.QueueSummary{}
	}
	figuresMatch(b, func(since time.Time) map[string]string {
		q := summary(since)
		return map[string]string{"q-pending": count(q.Pending), "q-scheduled": count(q.Scheduled), "q-running": count(q.Running),
			"q-retrying": count(q.Retrying), "q-succeeded": count(q.Succeeded), "q-failed": count(q.Failed), "q-cancelled": count(q.Cancelled)}
	})
	if q := summary(time.Now().Add(-time.Hour)); q.Pending != 6 || q.Scheduled != 2 || q.Running != 1 || q.Retrying != 1 || q.Succeeded < 100 {
		b.t.Fatalf("the test's data: %+v", q)
	}
	// The charts drew the queue's hour.
	if n := b.evalInt(`document.querySelectorAll('#chart-throughput rect.succeeded').length`); n < 30 {
		b.t.Errorf("throughput chart: %d bars of completed jobs", n)
	}
	if n := b.evalInt(`document.querySelectorAll('#chart-latency polyline.p99').length`); n < 1 {
		b.t.Errorf("latency chart: no p99 line")
	}
	if label := b.eval(`document.querySelector('#chart-throughput svg').getAttribute('aria-label')`); !strings.HasPrefix(label, "Queue payments: ") {
		b.t.Errorf("throughput chart's description: %q", label)
	}
	// The oldest due job, and the busiest groups with their limit.
	b.wantText("#oldest-due", fmt.Sprintf("Job %d", s.oldest))
	b.wantText("#oldest-due", "merchant:1")
	b.wantText("#oldest-due", "due 30 min")
	b.wantText(".groups tbody tr:first-child", "merchant:1")
	row := "#group-merchant\\:1"
	b.waitText(row+" td:nth-of-type(1)", "0", step) // running
	b.waitText(row+" td:nth-of-type(2)", "4", step) // pending
	b.waitText(row+" td.limit", "merchant:*: 2 at once · 60 per 1 min, bursts of 60", step)
	b.waitText("#group-merchant\\:2 td:nth-of-type(1)", "1", step)
	b.waitText("#group-merchant\\:2 td:nth-of-type(2)", "1", step)
	// merchant:2 ran, so it has a bucket: its tokens show (a number that
	// grows back as the rate refills).
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`/^[0-9]+$/.test((document.querySelector('#group-merchant\\:2 td.tokens') || {}).textContent)`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		b.t.Errorf("tokens of merchant:2: %q (%v)", b.text("#group-merchant\\:2 td.tokens"), err)
	}
	b.checkLabels()
	b.shot("queue")
	if *updateScreenshots && b.name == "postgres" {
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "queue.png"), b.screenshot(), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}

	// Pause and resume it from its page, which the actions come back to.
	paused := func() bool {
		b.t.Helper()
		qs, err := st.Queues(ctx)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "payments" {
				return q.Paused
			}
		}
		b.t.Fatal("no queue payments")
		return false
	}
	b.submit("button[aria-label='Pause queue payments']", http.StatusOK)
	b.wantText(".flash", "Queue paused")
	b.wantText("#queue-state", "paused")
	if loc := b.location(); !strings.HasPrefix(loc, b.base+"/queues/payments?") {
		b.t.Fatalf("after the pause: %s", loc)
	}
	if !paused() {
		b.t.Fatal("the queue is not paused")
	}
	b.shot("queue-paused")
	b.submit("button[aria-label='Resume queue payments']", http.StatusOK)
	b.wantText(".flash", "Queue resumed")
	b.wantText("#queue-state", "active")
	if paused() {
		b.t.Fatal("the queue is still paused")
	}

	// The governing limit's link leads to the limits page.
	b.click(row + " td.limit a")
	if loc := b.location(); !strings.HasPrefix(loc, b.base+"/limits#limit-") {
		b.t.Fatalf("the limit's link went to %s", loc)
	}
	// The job list's queue names lead to the queue's page too.
	b.nav("/jobs?queue=payments")
	b.waitVisible("table.jobs")
	b.click(fmt.Sprintf("#job-%d td.name a[href='/queues/payments']", s.oldest))
	b.wantText("h1", "Queue payments")
	// An unknown queue, or a name no queue can have, is a 404.
	for _, path := range []string{"/queues/no-such-queue", "/queues/two%20words", "/queues/no-such-queue/live"} {
		resp := b.load(chromedp.Navigate(b.base + path))
		if resp.Status != http.StatusNotFound {
			b.t.Errorf("%s: status %d, want 404", path, resp.Status)
		}
		b.wantText(".error", "no such queue")
	}
}

// figuresMatch waits, up to 15 s, until the page shows in each element
// named what want computes from the store for the figures the page shows:
// want gets where their finished counts start (from the tiles' data-at,
// when the refresh the figures come from started).
func figuresMatch(b *browser, want func(since time.Time) map[string]string) {
	b.t.Helper()
	w := want(time.Now().Add(-window))
	ids, _ := json.Marshal(slices.Sorted(maps.Keys(w)))
	js := fmt.Sprintf(`JSON.stringify({at: (document.querySelector('.tiles[data-at]') || {dataset: {}}).dataset.at || '',
  got: Object.fromEntries(%s.map(id => [id, (document.getElementById(id) || {}).textContent]))})`, ids)
	var got map[string]string
	for deadline := time.Now().Add(15 * time.Second); ; {
		var page struct {
			At  string
			Got map[string]string
		}
		if err := json.Unmarshal([]byte(b.eval(js)), &page); err != nil {
			b.t.Fatal(err)
		}
		got = page.Got
		if at, err := time.Parse(time.RFC3339Nano, page.At); err == nil {
			w = want(at.UTC().Truncate(time.Minute).Add(-window + time.Minute))
			if maps.Equal(got, w) {
				return
			}
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the page shows %v (figures of %s), the store says %v", got, page.At, w)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testBrowserRetries: the overview shows the jobs retrying apart from
// those failed for good; the Retries view lists them newest failure
// first with their latest error, attempt and next try; retry now and give
// up work on one job and on a selection, and name a job that started
// running meanwhile; a read-only login sees no action and may take none.
func testBrowserRetries(b *browser, bk *backend) {
	ctx := context.Background()
	st := bk.st
	desktop(b)
	now := time.Now()
	enqueue := func(queue string) int64 {
		b.t.Helper()
		jobs, err := st.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "deliver", Queue: queue, MaxAttempts: 5,
			Payload: []byte(`{"url":"https://partner.example/hook"}`)}})
		if err != nil {
			b.t.Fatal(err)
		}
		return jobs[0].ID
	}
	claim := func(queue string, id int64) *readpast.Job {
		b.t.Helper()
		c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Worker: "hooker-3", Limit: 1, Lease: time.Minute})
		if err != nil || len(c) != 1 || c[0].ID != id {
			b.t.Fatalf("claim %s: %v %v, want job %d", queue, c, err, id)
		}
		return c[0]
	}
	fail := func(j *readpast.Job, msg string, retryAt time.Time, discard bool) {
		b.t.Helper()
		if errs, err := st.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: msg, RetryAt: retryAt, Discard: discard}}); err != nil || errs[0] != nil {
			b.t.Fatalf("fail %d: %v %v", j.ID, errs, err)
		}
		time.Sleep(10 * time.Millisecond) // failures in a clear order
	}
	// late fails first; first starts first and fails last.
	late := enqueue("hooks-late")
	fail(claim("hooks-late", late), "429 Too Many Requests", now.Add(30*time.Minute), false)
	first := enqueue("hooks")
	jFirst := claim("hooks", first)
	h1 := enqueue("hooks")
	fail(claim("hooks", h1), "502 Bad Gateway from partner.example", now.Add(10*time.Minute), false)
	h2 := enqueue("hooks")
	fail(claim("hooks", h2), "timed out after 30s", now.Add(20*time.Minute), false)
	fail(jFirst, "connection reset by peer", now.Add(5*time.Minute), false)
	gone := enqueue("hooks")
	fail(claim("hooks", gone), "invalid payload: no url", time.Time{}, true) // failed for good

	// The overview: retrying and failed apart, each the store's.
	b.nav("/")
	b.waitVisible("#total-retrying")
	figuresMatch(b, func(since time.Time) map[string]string {
		qs, err := st.QueueSummaries(ctx, since)
		if err != nil {
			b.t.Fatal(err)
		}
		var retrying, failed int64
		for _, q := range qs {
			retrying += q.Retrying
			failed += q.Failed
		}
		return map[string]string{"total-retrying": count(retrying), "total-failed": count(failed)}
	})
	b.waitText("#queue-hooks td.retrying", "3", 15*time.Second)
	b.click("#queue-hooks td.retrying a")
	if loc := b.location(); loc != b.base+"/retries?queue=hooks" {
		b.t.Fatalf("the queue's retrying count went to %s", loc)
	}
	if got, want := b.rowIDs(), []int64{first, h2, h1}; !slices.Equal(got, want) {
		b.t.Fatalf("retrying in hooks: %v, want %v", got, want)
	}

	// Every queue, from the menu: newest failure first, as the store lists
	// them (the queue page's retrying job failed before these).
	b.click("nav a[href='/retries']")
	b.waitVisible("table.retries")
	res, err := st.Retrying(ctx, readpast.RetryingParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	got := b.rowIDs()
	if !slices.Equal(got, idsOf(res.Jobs)) || len(got) < 4 || !slices.Equal(got[:4], []int64{first, h2, h1, late}) {
		b.t.Fatalf("retries view: %v; the store lists %v; want %v first", got, idsOf(res.Jobs), []int64{first, h2, h1, late})
	}
	b.wantText("#retries-count", fmt.Sprintf("%d jobs are retrying", len(got)))
	r := fmt.Sprintf("#job-%d", h1)
	b.wantText(r+" .last-error", "502 Bad Gateway from partner.example")
	b.wantText(r+" .tries", "1 of 5")
	b.wantText(r+" .next", "in ")
	// "now" for a failure under a second old: a fast machine gets here
	// that soon.
	if t := strings.TrimSpace(b.text(r + " .failed")); !strings.Contains(t, "ago") && t != "now" {
		b.t.Fatalf("the failure's time reads %q, want \"… ago\" or \"now\"", t)
	}
	b.checkLabels()
	b.shot("retries")
	if *updateScreenshots && b.name == "postgres" {
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "retries.png"), b.screenshot(), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	job := func(id int64) *readpast.Job {
		b.t.Helper()
		j, err := st.Get(ctx, id)
		if err != nil {
			b.t.Fatal(err)
		}
		return j
	}
	due := func(ids ...int64) {
		b.t.Helper()
		for _, id := range ids {
			if j := job(id); j.State != readpast.StatePending || j.Attempt != 1 || j.RunAt.After(time.Now()) {
				b.t.Fatalf("job %d after retry now: %s, attempt %d, due %v", id, j.State, j.Attempt, j.RunAt)
			}
		}
	}

	// Retry now: one, then a selection.
	b.submit(fmt.Sprintf("button[aria-label='Retry job %d now']", h1), http.StatusOK)
	b.wantText(".flash", "1 job made due now.")
	due(h1)
	b.wantText(r+" .next", "due now")
	if j := job(h2); !j.RunAt.After(time.Now()) {
		b.t.Fatal("retrying one job made another due")
	}
	b.toggle(fmt.Sprintf("#pick-%d", h2))
	b.toggle(fmt.Sprintf("#pick-%d", late))
	b.submit("#retry-selected", http.StatusOK)
	b.wantText(".flash", "2 jobs made due now.")
	due(h2, late)
	if j := job(first); !j.RunAt.After(time.Now()) {
		b.t.Fatal("retrying the selection made a job outside it due")
	}

	// Give up: one, then a selection whose second job a worker takes
	// before the button is pressed.
	b.submit(fmt.Sprintf("button[aria-label='Give up job %d']", first), http.StatusOK)
	b.wantText(".flash", "1 job given up (cancelled).")
	if j := job(first); j.State != readpast.StateCancelled {
		b.t.Fatalf("job %d after give up: %s", first, j.State)
	}
	if n := b.evalInt(fmt.Sprintf(`document.querySelectorAll('#job-%d').length`, first)); n != 0 {
		b.t.Fatal("a job given up is still listed")
	}
	b.toggle(fmt.Sprintf("#pick-%d", h2))
	b.toggle(fmt.Sprintf("#pick-%d", late))
	claim("hooks-late", late) // due since the retry now above
	b.submit("#giveup-selected", http.StatusOK)
	b.wantText(".flash", "1 job given up (cancelled).")
	b.wantText(".flash", fmt.Sprintf("Not acted on: job %d (it started running meanwhile).", late))
	if j := job(h2); j.State != readpast.StateCancelled {
		b.t.Fatalf("job %d after giving up the selection: %s", h2, j.State)
	}
	if j := job(late); j.State != readpast.StateRunning {
		b.t.Fatalf("job %d, running before the give up: %s", late, j.State)
	}
	// Nothing selected: nothing done, and said so.
	b.submit("#retry-selected", http.StatusOK)
	b.wantText(".flash", "No job was selected.")

	// At a phone's width the new pages fit.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	for _, path := range []string{"/retries", "/queues/payments"} {
		b.nav(path)
		b.noOverflow()
	}
	desktop(b)

	// A read-only login sees the jobs but no action, and its made-up
	// action is refused.
	ro := b.other(b.t)
	ro.nav("/login")
	ro.do(chromedp.SendKeys(chromedp.CSS("#token"), readToken))
	ro.submit("form[action='/login'] button", http.StatusOK)
	ro.nav("/retries")
	ro.waitVisible("table.retries")
	if n := ro.evalInt(`document.querySelectorAll('main form[method=post], main input[type=checkbox], .row-actions, #retry-selected, #giveup-selected').length`); n != 0 {
		ro.t.Errorf("a read-only Retries view offers %d action forms, checkboxes or buttons", n)
	}
	resp := ro.load(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(function () {
  var f = document.createElement('form');
  f.method = 'post';
  f.action = '/retries/cancel';
  f.appendChild(document.querySelector('input[name=csrf]').cloneNode());
  var id = document.createElement('input');
  id.name = 'only';
  id.value = '%d';
  f.appendChild(id);
  document.body.appendChild(f);
  f.submit();
})()`, h1)))
	if resp.Status != http.StatusForbidden {
		ro.t.Errorf("a read-only give up was answered %d", resp.Status)
	}
	if j := job(h1); j.State != readpast.StatePending {
		ro.t.Fatalf("a read-only login gave up job %d: %s", h1, j.State)
	}
}

// desktop sets the tab to the desktop size the test starts with
// (newBrowser), whatever an earlier test emulated: the screenshots in the
// docs are of that size.
func desktop(b *browser) {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(1280, 900))
}

func idsOf(jobs []*readpast.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}
