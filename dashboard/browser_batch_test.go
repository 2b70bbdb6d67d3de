package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/chromedp/chromedp"

	"github.com/readpast/readpast"
)

// testBrowserBatch: the page of a batch's finishing job shows the Batch
// panel (open, what it runs on, its members by state); a read-only login
// sees no Seal button; Seal seals it (the database read after it) and
// the page says so, sealed and without the button; once the last member
// ends the batch is closed; the members' count leads to the flow page.
func testBrowserBatch(b *browser, st testStore) {
	ctx := context.Background()
	bs, ok := st.(readpast.BatchStore)
	if !ok {
		b.t.Fatalf("%T is not a readpast.BatchStore", st)
	}
	fin, ms := openBatch(b.t, bs, "batchq", false, 2)
	finish(b.t, st, "batchq-m", ms[0].ID, false)

	b.do(chromedp.EmulateViewport(1280, 900))
	b.nav(fmt.Sprintf("/jobs/%d", fin.ID))
	b.wantText("#batch-status", "open")
	b.wantText("#batch-runs", "whatever its members' outcomes")
	b.wantText("#batch-members", "2")
	b.wantText("#batch-live", "1")
	b.wantText("#batch-succeeded", "1")
	b.wantText("#action-seal", "Seal")
	b.noOverflow()
	b.shot("job-batch-open")

	// A read-only login: the panel, no button.
	ro := b.other(b.t)
	ro.nav("/login")
	ro.do(chromedp.SendKeys(chromedp.CSS("#token"), readToken))
	ro.submit("form[action='/login'] button", http.StatusOK)
	ro.nav(fmt.Sprintf("/jobs/%d", fin.ID))
	ro.wantText("#batch-status", "open")
	if n := ro.evalInt(`document.querySelectorAll('#action-seal, form[action$="/seal"]').length`); n != 0 {
		b.t.Errorf("a read-only login's batch page offers %d seal buttons", n)
	}

	b.submit("#action-seal", http.StatusOK)
	b.wantText(".flash", "Batch sealed")
	b.wantText("#batch-status", "sealed")
	if n := b.evalInt(`document.querySelectorAll('#action-seal').length`); n != 0 {
		b.t.Error("a sealed batch still offers Seal")
	}
	if bt, err := bs.Batch(ctx, fin.ID); err != nil || !bt.Sealed || bt.Finisher.State != readpast.StateBlocked {
		b.t.Fatalf("after Seal: %+v %v", bt, err)
	}
	b.shot("job-batch-sealed")

	finish(b.t, st, "batchq-m", ms[1].ID, true)
	b.nav(fmt.Sprintf("/jobs/%d", fin.ID))
	b.wantText("#batch-status", "closed")
	b.wantText("#batch-failed", "1")
	b.wantText("h1 .state", "pending")
	b.click("#batch-members a")
	b.waitVisible("#flow-graph")
	b.wantText("h1", fmt.Sprintf("Flow of job %d", fin.ID))
	if n := b.evalInt(`document.querySelectorAll('#flow-graph a.node').length`); n != 3 {
		b.t.Errorf("the batch's flow draws %d jobs, want its 2 members and its finishing job", n)
	}
}
