package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/readpast/readpast"
)

// TestBlockedJobs: the job list offers the state blocked and filters by
// it, shows a blocked job's state styled as such, and a blocked job's page
// offers Cancel (and neither Run now nor Retry), which cancels it.
func TestBlockedJobs(t *testing.T) {
	e := newEnv(t, false)
	fs, ok := e.store.(readpast.FlowStore)
	if !ok {
		t.Fatalf("%T is not a readpast.FlowStore", e.store)
	}
	jobs, err := fs.EnqueueFlow(context.Background(), []readpast.FlowJob{
		{Ref: "a", Job: readpast.EnqueueParams{Kind: "parent", Queue: "fl"}},
		{Job: readpast.EnqueueParams{Kind: "child", Queue: "fl"}, After: []readpast.After{{Ref: "a"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	parent, child := jobs[0], jobs[1]
	if child.State != readpast.StateBlocked {
		t.Fatalf("child is %s, want blocked", child.State)
	}

	list := e.do(req{path: "/jobs"})
	if list.status != http.StatusOK || !strings.Contains(list.body, `<option value="blocked"`) {
		t.Fatalf("the job list's state filter lacks blocked: %d\n%s", list.status, list.body)
	}
	blocked := e.do(req{path: "/jobs?state=blocked"})
	rows := regexp.MustCompile(`<tr id="job-(\d+)">`).FindAllStringSubmatch(blocked.body, -1)
	if blocked.status != http.StatusOK || len(rows) != 1 || rows[0][1] != strconv.FormatInt(child.ID, 10) ||
		!strings.Contains(blocked.body, `<span class="state blocked">blocked</span>`) {
		t.Fatalf("/jobs?state=blocked: %d, rows %v\n%s", blocked.status, rows, blocked.body)
	}
	if css := e.do(req{path: "/static/style.css"}); !strings.Contains(css.body, ".state.blocked") {
		t.Error("style.css has no style for the state blocked")
	}

	page := e.do(req{path: "/jobs/" + strconv.FormatInt(child.ID, 10)})
	if page.status != http.StatusOK || !strings.Contains(page.body, `id="action-cancel"`) ||
		strings.Contains(page.body, `id="action-run"`) || strings.Contains(page.body, `id="action-retry"`) {
		t.Fatalf("a blocked job's page: %d\n%s", page.status, page.body)
	}
	r := e.do(req{method: "POST", path: "/jobs/" + strconv.FormatInt(child.ID, 10) + "/cancel",
		form: url.Values{csrfField: {csrfOf(t, page.body)}}})
	if r.status != http.StatusSeeOther || e.state(child.ID) != readpast.StateCancelled {
		t.Fatalf("cancel a blocked job: %d, job %s\n%s", r.status, e.state(child.ID), r.body)
	}
	if e.state(parent.ID) != readpast.StatePending {
		t.Errorf("cancelling the child changed its parent: %s", e.state(parent.ID))
	}
}
