package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/cursor"
	"github.com/readpast/readpast/postgres"
)

// envSpeedURL names the PostgreSQL database TestSpeed measures. Without
// it the test is skipped: it needs a database filled by
// testdata/speed.sql (10 million finished jobs, 1 million waiting),
// which takes minutes to build. See docs/dashboard.md, "Speed".
const envSpeedURL = "READPAST_SPEED_DATABASE_URL"

// speedBudget is what a page may take to render.
const speedBudget = 200 * time.Millisecond

// TestSpeed renders every page of the dashboard, each several times, on
// a database with 10 million jobs in the history and 1 million waiting,
// prints the median and slowest render of each, and fails when a page's
// median exceeds speedBudget. It also times the overview's figures, which
// a background refresh reads (the pages show the latest).
func TestSpeed(t *testing.T) {
	dbURL := os.Getenv(envSpeedURL)
	if dbURL == "" {
		t.Skipf("set %s to a PostgreSQL database filled by testdata/speed.sql", envSpeedURL)
	}
	ctx := context.Background()
	st, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var history, live int64
	if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM readpast_jobs_history), (SELECT count(*) FROM readpast_jobs)`).Scan(&history, &live); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs in the history, %d live", history, live)
	if history < 10_000_000 || live < 1_000_000 {
		t.Fatalf("the database holds too few jobs: fill it with testdata/speed.sql")
	}
	var failedID, pendingID, runningID int64
	if err := st.Pool().QueryRow(ctx, `SELECT
    (SELECT max(id) FROM readpast_jobs_history WHERE state = 'failed' AND id < 5000000),
    (SELECT max(id) FROM readpast_jobs WHERE state = 'pending'),
    (SELECT max(id) FROM readpast_jobs WHERE state = 'running')`).Scan(&failedID, &pendingID, &runningID); err != nil {
		t.Fatal(err)
	}

	// A hundred schedules, for the schedules page.
	for i := range 100 {
		if _, _, err := st.PutSchedule(ctx, readpast.ScheduleParams{Name: fmt.Sprintf("speed-%03d", i), Cron: fmt.Sprintf("%d 3 * * *", i%60),
			TimeZone: "Europe/Paris", Job: readpast.EnqueueParams{Kind: "report", Queue: "reports"}}); err != nil {
			t.Fatal(err)
		}
	}

	h, err := New(Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The overview's figures: what one background refresh takes.
	var took []time.Duration
	for range 5 {
		ov, err := h.overview.load()
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, ov.Took)
	}
	t.Logf("overview refresh (background): median %s, slowest %s", median(took), slices.Max(took))
	if _, err := h.overview.get(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	get := func(path string) (string, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		d := time.Since(start)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, res.StatusCode, err)
		}
		return string(body), d
	}
	older := regexp.MustCompile(`<a href="([^"]+)" rel="next" id="older">`)
	// nextPage is the address of the page after path's.
	nextPage := func(path string) string {
		t.Helper()
		body, _ := get(path)
		m := older.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s has no next page", path)
		}
		return strings.ReplaceAll(m[1], "&amp;", "&")
	}
	pages := []string{
		"/",
		"/overview/live",
		"/jobs",
		nextPage("/jobs"),
		"/jobs?cursor=" + cursor.Encode(5_000_000), // deep in the history
		"/jobs?queue=mail",
		"/jobs?state=pending",
		"/jobs?state=running",
		"/jobs?state=failed",
		nextPage("/jobs?state=failed"),
		"/jobs?state=cancelled",
		"/jobs?kind=render",
		"/jobs?group=tenant-7",
		"/jobs?queue=sms&state=failed&kind=text",
		"/jobs?kind=nosuchkind", // no match: the whole scan budget
		"/jobs?state=failed&kind=nosuchkind",
		"/jobs?q=" + url.QueryEscape("customer 4242"),
		"/jobs?q=nosuchtext",
		"/jobs?state=failed&q=" + url.QueryEscape("timed out"),
		"/jobs?q=nosuchtext&cursor=" + cursor.Encode(5_000_000),
		fmt.Sprintf("/jobs/%d", failedID),
		fmt.Sprintf("/jobs/%d", pendingID),
		fmt.Sprintf("/jobs/%d", runningID),
		"/schedules",
	}
	const runs = 7
	var report strings.Builder
	fmt.Fprintf(&report, "%-60s %8s %8s\n", "page", "median", "slowest")
	for _, p := range pages {
		var ds []time.Duration
		for range runs {
			_, d := get(p)
			ds = append(ds, d)
		}
		m := median(ds)
		fmt.Fprintf(&report, "%-60s %8s %8s\n", p, m.Round(100*time.Microsecond), slices.Max(ds).Round(100*time.Microsecond))
		if m > speedBudget {
			t.Errorf("%s: median render %s, over %s", p, m, speedBudget)
		}
	}
	t.Logf("page renders (%d runs each):\n%s", runs, report.String())

	// Actions: the POST alone, up to its redirect. A job's action does
	// not wait for the overview's figures; pausing or resuming a queue
	// does (its next page is the overview, which shows the change).
	noFollow := *srv.Client()
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(path string) time.Duration {
		t.Helper()
		start := time.Now()
		res, err := noFollow.PostForm(srv.URL+path, url.Values{csrfField: {csrfToken(h.csrfKey)}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		d := time.Since(start)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		return d
	}
	report.Reset()
	fmt.Fprintf(&report, "%-60s %8s\n", "action", "took")
	for _, p := range []string{
		fmt.Sprintf("/jobs/%d/cancel", pendingID),
		fmt.Sprintf("/jobs/%d/retry", pendingID),
		fmt.Sprintf("/jobs/%d/retry", failedID),
		fmt.Sprintf("/jobs/%d/cancel", failedID),
		"/queues/mail/pause",
		"/queues/mail/resume",
		"/schedules/speed-007/pause",
		"/schedules/speed-007/resume",
	} {
		fmt.Fprintf(&report, "%-60s %8s\n", p, post(p).Round(100*time.Microsecond))
	}
	t.Logf("actions:\n%s", report.String())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
