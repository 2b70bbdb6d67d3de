package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// countingStore is a SQLite store that counts its Batch reads.
type countingStore struct {
	*sqlite.Store
	batchReads atomic.Int64
}

func (s *countingStore) Batch(ctx context.Context, id int64) (readpast.Batch, error) {
	s.batchReads.Add(1)
	return s.Store.Batch(ctx, id)
}

// newBatchEnv is newEnv (with tokens) on a store that counts its Batch
// reads.
func newBatchEnv(t *testing.T) (*env, *countingStore) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "batch.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	h, err := New(Config{Store: cs, Tokens: []string{fullToken}, ReadTokens: []string{readToken}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: cs, h: h, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		e.srv.Close()
		h.Close()
		st.Close()
	})
	return e, cs
}

// openBatch opens a batch on s whose finishing job is of queue q, with
// members of queue q+"-m".
func openBatch(t *testing.T, s readpast.BatchStore, q string, onSuccess bool, members int) (*readpast.Job, []*readpast.Job) {
	t.Helper()
	ctx := context.Background()
	p, err := readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "notify", Queue: q}, OnSuccess: onSuccess}.Normalize(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fin, err := s.OpenBatch(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if members == 0 {
		return fin, nil
	}
	var ps []readpast.EnqueueParams
	for range members {
		ps = append(ps, readpast.EnqueueParams{Kind: "thumbnail", Queue: q + "-m"})
	}
	if ps, err = readpast.NormalizeBatchJobs(ps, time.Now()); err != nil {
		t.Fatal(err)
	}
	ms, err := s.AddToBatch(ctx, fin.ID, ps)
	if err != nil {
		t.Fatal(err)
	}
	return fin, ms
}

// batchFacts reads the Batch panel of a job's page: its status and its
// counts by element id ("members", "live", ...); ok is false when the
// page has no panel.
func batchFacts(t *testing.T, body string) (status string, counts map[string]string, ok bool) {
	t.Helper()
	start := strings.Index(body, `<section aria-labelledby="batch-h" id="batch">`)
	if start < 0 {
		return "", nil, false
	}
	end := strings.Index(body[start:], "</section>")
	if end < 0 {
		t.Fatal("the Batch panel does not end")
	}
	panel := body[start : start+end]
	m := regexp.MustCompile(`<p id="batch-status"><span class="badge (\w+)">(\w+)</span>`).FindStringSubmatch(panel)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the Batch panel has no status:\n%s", panel)
	}
	counts = map[string]string{}
	for _, c := range regexp.MustCompile(`<dd id="batch-(\w+)">(?:<a href="[^"]*">)?([^<]*)`).FindAllStringSubmatch(panel, -1) {
		counts[c[1]] = c[2]
	}
	return m[1], counts, true
}

// TestBatchPanel: the page of a batch's finishing job shows a Batch
// panel: open, sealed or closed, what its finishing job runs on, its
// members counted by state linking to the flow page, and, while it is
// open, a Seal button for a full login only. Sealing answers with the
// page and its message; the counts follow the members; a batch with no
// member is released by its seal. Jobs outside batches show no panel and
// cost no batch read.
func TestBatchPanel(t *testing.T) {
	e, cs := newBatchEnv(t)
	fin, ms := openBatch(t, cs, "bp", false, 3)
	page := func(id int64, token string) resp {
		t.Helper()
		p := e.do(req{path: fmt.Sprintf("/jobs/%d", id), token: token})
		if p.status != http.StatusOK {
			t.Fatalf("job %d's page: %d\n%s", id, p.status, p.body)
		}
		return p
	}
	wantCounts := func(body string, want map[string]string) {
		t.Helper()
		_, got, ok := batchFacts(t, body)
		if !ok {
			t.Fatalf("no Batch panel:\n%s", body)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("batch %s: %q, want %q (all: %v)", k, got[k], v, got)
			}
		}
	}

	// Open, three live members.
	before := cs.batchReads.Load()
	p := page(fin.ID, fullToken)
	if n := cs.batchReads.Load() - before; n != 1 {
		t.Errorf("the finishing job's page read its batch %d times, want 1", n)
	}
	status, _, _ := batchFacts(t, p.body)
	if status != "open" {
		t.Errorf("status %q, want open", status)
	}
	wantCounts(p.body, map[string]string{"members": "3", "live": "3", "succeeded": "0", "failed": "0", "cancelled": "0"})
	flow := fmt.Sprintf(`<dd id="batch-members"><a href="/jobs/%d/flow">3</a>`, fin.ID)
	for _, want := range []string{flow, `<dd id="batch-runs">whatever its members' outcomes</dd>`,
		fmt.Sprintf(`<form method="post" action="/jobs/%d/seal">`, fin.ID), `id="action-seal"`, `id="action-cancel"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the open batch's page lacks %s", want)
		}
	}
	// A read-only login sees the panel and no button, and may not seal.
	ro := page(fin.ID, readToken)
	if _, _, ok := batchFacts(t, ro.body); !ok || strings.Contains(ro.body, "action-seal") || strings.Contains(ro.body, "/seal") {
		t.Errorf("a read-only login's page of an open batch (panel %v):\n%s", ok, ro.body)
	}
	seal := func(token string, form url.Values) resp {
		t.Helper()
		return e.do(req{method: "POST", path: fmt.Sprintf("/jobs/%d/seal", fin.ID), token: token, form: form})
	}
	if r := seal(readToken, url.Values{csrfField: {csrfOf(t, ro.body)}}); r.status != http.StatusForbidden || !strings.Contains(r.body, "may only look") {
		t.Errorf("a read-only seal: %d", r.status)
	}
	if r := seal(fullToken, url.Values{csrfField: {"forged"}}); r.status != http.StatusForbidden {
		t.Errorf("a seal with a wrong form token: %d", r.status)
	}
	if b, err := cs.Batch(context.Background(), fin.ID); err != nil || b.Sealed {
		t.Fatalf("refused seals sealed the batch: %+v %v", b, err)
	}

	// Members end: the counts follow.
	finish(t, cs, "bp-m", ms[0].ID, false)
	finish(t, cs, "bp-m", ms[1].ID, true)
	p = page(fin.ID, fullToken)
	wantCounts(p.body, map[string]string{"members": "3", "live": "1", "succeeded": "1", "failed": "1", "cancelled": "0"})

	// Seal: back to the page, which says so; sealed, no button.
	r := seal(fullToken, url.Values{csrfField: {csrfOf(t, p.body)}, "next": {fmt.Sprintf("/jobs/%d", fin.ID)}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != fmt.Sprintf("/jobs/%d?done=seal", fin.ID) {
		t.Fatalf("seal: %d %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	if b, err := cs.Batch(context.Background(), fin.ID); err != nil || !b.Sealed || b.Finisher.State != readpast.StateBlocked {
		t.Fatalf("after the seal: %+v %v", b, err)
	}
	p = e.do(req{path: r.header.Get("Location"), token: fullToken})
	if status, _, _ := batchFacts(t, p.body); status != "sealed" || !strings.Contains(p.body, `<p class="flash" role="status">Batch sealed: no job joins it`) ||
		strings.Contains(p.body, "action-seal") {
		t.Errorf("the page after the seal (status %q):\n%s", status, p.body)
	}
	// A second seal (a page shown before the first) is harmless.
	if r := seal(fullToken, url.Values{csrfField: {csrfOf(t, p.body)}}); r.status != http.StatusSeeOther {
		t.Errorf("a second seal: %d\n%s", r.status, r.body)
	}

	// The last member ends: the finishing job is released, the batch closed.
	finish(t, cs, "bp-m", ms[2].ID, false)
	if st := e.state(fin.ID); st != readpast.StatePending {
		t.Fatalf("the finishing job is %s after the last member, want pending", st)
	}
	p = page(fin.ID, fullToken)
	if status, _, _ := batchFacts(t, p.body); status != "closed" || strings.Contains(p.body, "action-seal") {
		t.Errorf("the released batch's status is %q:\n%s", status, p.body)
	}
	wantCounts(p.body, map[string]string{"members": "3", "live": "0", "succeeded": "2", "failed": "1"})

	// Members, a lone job and the first job of a flow: no panel, no read.
	lone := e.enqueue(readpast.EnqueueParams{Kind: "lone", Queue: "bp"})
	flow2 := e.enqueueFlow(
		readpast.FlowJob{Ref: "a", Job: readpast.EnqueueParams{Kind: "a", Queue: "bpf"}},
		readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "b", Queue: "bpf"}, After: []readpast.After{{Ref: "a"}}},
	)
	before = cs.batchReads.Load()
	for _, id := range []int64{ms[0].ID, ms[2].ID, lone.ID, flow2[0].ID} {
		if _, _, ok := batchFacts(t, page(id, fullToken).body); ok {
			t.Errorf("job %d, outside batches, shows a Batch panel", id)
		}
	}
	if n := cs.batchReads.Load() - before; n != 0 {
		t.Errorf("pages of jobs outside batches read batches %d times", n)
	}
	// A flow's blocked job may be a batch's: one read, and no panel.
	if _, _, ok := batchFacts(t, page(flow2[1].ID, fullToken).body); ok || cs.batchReads.Load()-before != 1 {
		t.Errorf("a flow's blocked job: panel %v, %d batch reads", ok, cs.batchReads.Load()-before)
	}
	// Sealing a job that finishes no batch: a clear 404.
	r = e.do(req{method: "POST", path: fmt.Sprintf("/jobs/%d/seal", lone.ID), token: fullToken,
		form: url.Values{csrfField: {csrfOf(t, p.body)}}})
	if r.status != http.StatusNotFound || !strings.Contains(r.body, fmt.Sprintf("job %d finishes none", lone.ID)) {
		t.Errorf("sealing a lone job: %d\n%s", r.status, r.body)
	}
	if st := e.state(lone.ID); st != readpast.StatePending {
		t.Errorf("sealing a lone job changed it: %s", st)
	}
}

// TestBatchPanelEmptyAndOnSuccess: a batch with no member shows zero
// counts and no link, and its seal releases its finishing job, which the
// message says; an OnSuccess batch says it runs only if every member
// succeeds, and once a member fails (its finishing job cancelled) it is
// closed, with no Seal button.
func TestBatchPanelEmptyAndOnSuccess(t *testing.T) {
	e, cs := newBatchEnv(t)
	empty, _ := openBatch(t, cs, "be", false, 0)
	p := e.do(req{path: fmt.Sprintf("/jobs/%d", empty.ID), token: fullToken})
	status, counts, ok := batchFacts(t, p.body)
	if !ok || status != "open" || counts["members"] != "0" || counts["live"] != "0" ||
		strings.Contains(p.body, "/flow") || !strings.Contains(p.body, `id="action-seal"`) {
		t.Fatalf("an empty batch: panel %v, %q %v\n%s", ok, status, counts, p.body)
	}
	r := e.do(req{method: "POST", path: fmt.Sprintf("/jobs/%d/seal", empty.ID), token: fullToken,
		form: url.Values{csrfField: {csrfOf(t, p.body)}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != fmt.Sprintf("/jobs/%d?done=seal-released", empty.ID) {
		t.Fatalf("seal an empty batch: %d %q", r.status, r.header.Get("Location"))
	}
	if st := e.state(empty.ID); st != readpast.StatePending {
		t.Fatalf("the empty batch's finishing job is %s after its seal, want pending", st)
	}
	if p := e.do(req{path: r.header.Get("Location"), token: fullToken}); !strings.Contains(p.body, "every member had ended, so its finishing job is released") {
		t.Errorf("the page after sealing an empty batch:\n%s", p.body)
	}

	fin, ms := openBatch(t, cs, "bs", true, 2)
	p = e.do(req{path: fmt.Sprintf("/jobs/%d", fin.ID), token: fullToken})
	if !strings.Contains(p.body, `<dd id="batch-runs">only if every member succeeds</dd>`) {
		t.Errorf("an OnSuccess batch's page:\n%s", p.body)
	}
	finish(t, cs, "bs-m", ms[0].ID, true)
	p = e.do(req{path: fmt.Sprintf("/jobs/%d", fin.ID), token: fullToken})
	status, counts, _ = batchFacts(t, p.body)
	if status != "closed" || counts["failed"] != "1" || counts["live"] != "1" || strings.Contains(p.body, "action-seal") ||
		!strings.Contains(p.body, "has left blocked (now cancelled)") {
		t.Errorf("an OnSuccess batch whose member failed: %q %v\n%s", status, counts, p.body)
	}
	// A seal from a page shown before (the batch closed since): it
	// changes nothing, and the message says the finishing job had ended.
	r = e.do(req{method: "POST", path: fmt.Sprintf("/jobs/%d/seal", fin.ID), token: fullToken,
		form: url.Values{csrfField: {csrfOf(t, p.body)}}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != fmt.Sprintf("/jobs/%d?done=seal-ended", fin.ID) ||
		e.state(fin.ID) != readpast.StateCancelled {
		t.Errorf("sealing a closed batch: %d %q, finishing job %s", r.status, r.header.Get("Location"), e.state(fin.ID))
	}
}
