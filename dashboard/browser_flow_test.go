package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/readpast/readpast"
)

// testBrowserFlow: a job's page lists its parents and children, with
// their states, and links to the flow page; the flow page draws every
// job of the flow as a box coloured by its state (the stylesheet's, in
// light and dark mode), parents above children, with an arrow per edge;
// a box is a link, by mouse and by keyboard; at a phone's width the
// drawing scrolls inside its frame instead of widening the page.
func testBrowserFlow(b *browser, st testStore) {
	ctx := context.Background()
	fs, ok := st.(readpast.FlowStore)
	if !ok {
		b.t.Fatalf("%T is not a readpast.FlowStore", st)
	}
	jobs, err := fs.EnqueueFlow(ctx, []readpast.FlowJob{
		{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Queue: "flowq"}},
		{Ref: "render", Job: readpast.EnqueueParams{Kind: "render", Queue: "flowq"}, After: []readpast.After{{Ref: "extract"}}},
		{Ref: "thumbnails", Job: readpast.EnqueueParams{Kind: "thumbs", Queue: "flowq"},
			After: []readpast.After{{Ref: "extract", Policy: readpast.RunAnyway}}},
		{Ref: "publish", Job: readpast.EnqueueParams{Kind: "publish", Queue: "flowq"},
			After: []readpast.After{{Ref: "render"}, {Ref: "thumbnails", Policy: readpast.HoldChild}}},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	extract, render, publish := jobs[0].ID, jobs[1].ID, jobs[3].ID
	c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{"flowq"}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != extract {
		b.t.Fatalf("claim the flow's first job: %v %v", c, err)
	}
	if errs, err := st.Complete(ctx, []readpast.Completion{{ID: extract, Token: c[0].Token}}); err != nil || errs[0] != nil {
		b.t.Fatalf("complete job %d: %v %v", extract, err, errs)
	}

	b.do(chromedp.EmulateViewport(1280, 900))
	b.nav(fmt.Sprintf("/jobs/%d", render))
	b.wantText(fmt.Sprintf("#parents-%d", extract), "succeeded")
	b.wantText(fmt.Sprintf("#parents-%d", extract), "done")
	b.wantText(fmt.Sprintf("#children-%d", publish), "blocked")
	b.wantText(fmt.Sprintf("#children-%d", publish), "cancel_child")
	b.shot("job-relatives")
	b.click("#flow-link")
	b.waitVisible("#flow-graph")
	b.wantText("h1", fmt.Sprintf("Flow of job %d", render))
	if n, l := b.evalInt(`document.querySelectorAll('#flow-graph a.node').length`), b.evalInt(`document.querySelectorAll('#flow-graph line.edge').length`); n != 4 || l != 4 {
		b.t.Fatalf("the drawing has %d boxes and %d arrows, want 4 and 4", n, l)
	}
	top := func(id int64) int64 {
		return b.evalInt(fmt.Sprintf(`Math.round(document.getElementById('node-%d').getBoundingClientRect().top)`, id))
	}
	if !(top(extract) < top(render) && top(render) < top(publish)) {
		b.t.Errorf("boxes at %d, %d, %d: parents are not drawn above their children", top(extract), top(render), top(publish))
	}
	fill := func(id int64) string {
		return b.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('#node-%d rect')).fill`, id))
	}
	// The state badges' colours: --ok-bg and --grey-bg, light then dark.
	if got := fill(extract); got != "rgb(218, 251, 225)" {
		b.t.Errorf("a succeeded job's box is filled %s, want the succeeded badge's rgb(218, 251, 225)", got)
	}
	if got := fill(publish); got != "rgb(234, 238, 242)" {
		b.t.Errorf("a blocked job's box is filled %s, want the blocked badge's rgb(234, 238, 242)", got)
	}
	if dash := b.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('line[data-parent="%d"][data-child="%d"]')).strokeDasharray`, jobs[2].ID, publish)); dash == "none" {
		b.t.Error("a hold_child edge is drawn solid, like a cancel_child one")
	}
	b.noOverflow()
	b.shot("flow")
	b.dark(true)
	b.nav(fmt.Sprintf("/jobs/%d/flow", render))
	b.waitVisible("#flow-graph")
	if got := fill(extract); got != "rgb(18, 54, 29)" {
		b.t.Errorf("in dark mode a succeeded job's box is filled %s, want rgb(18, 54, 29)", got)
	}
	b.shot("flow-dark")
	b.dark(false)

	// A box is a link: by mouse, and by keyboard.
	b.nav(fmt.Sprintf("/jobs/%d/flow", render))
	b.click(fmt.Sprintf("#node-%d", publish))
	b.wantText("h1", fmt.Sprintf("Job %d", publish))
	b.nav(fmt.Sprintf("/jobs/%d/flow", render))
	b.waitVisible("#flow-graph")
	b.do(chromedp.Focus(fmt.Sprintf("#node-%d", extract)))
	b.load(chromedp.KeyEvent(kb.Enter))
	b.wantText("h1", fmt.Sprintf("Job %d", extract))

	// A fan-out wider than the phone: the drawing scrolls in its frame.
	fan := []readpast.FlowJob{{Ref: "top", Job: readpast.EnqueueParams{Kind: "fan-top", Queue: "flowfan"}}}
	for range 12 {
		fan = append(fan, readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "fan-leaf", Queue: "flowfan"}, After: []readpast.After{{Ref: "top"}}})
	}
	fj, err := fs.EnqueueFlow(ctx, fan)
	if err != nil {
		b.t.Fatal(err)
	}
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	b.nav(fmt.Sprintf("/jobs/%d/flow", fj[0].ID))
	b.waitVisible("#flow-graph")
	b.noOverflow()
	if w := b.evalInt(`document.querySelector('.flow-wrap').scrollWidth - document.querySelector('.flow-wrap').clientWidth`); w <= 0 {
		b.t.Errorf("the wide drawing does not scroll in its frame (%d)", w)
	}
	// The script scrolls the frame to the job the page is about.
	if off := b.evalInt(`(() => {
		const f = document.querySelector('.flow-wrap').getBoundingClientRect();
		const n = document.querySelector('.node.current rect').getBoundingClientRect();
		return Math.round(Math.abs(n.left + n.width / 2 - (f.left + f.width / 2)));
	})()`); off > 2 {
		b.t.Errorf("the current job's box is %d px off the frame's centre", off)
	}
	b.shot("flow-phone")
	b.nav(fmt.Sprintf("/jobs/%d", render))
	b.noOverflow()
	b.shot("job-relatives-phone")
	b.do(chromedp.EmulateViewport(1280, 900))
}
