package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// claimFirst is a store on which, once armed, a worker claims the job of
// queue "race" at the Retries action's first store call for a job: right
// after a Get has read it, or right before a Cancel or CancelPending. It
// stands for a claim that commits after the page was shown and before
// the action's cancel, whichever way the action reads and cancels.
type claimFirst struct {
	*sqlite.Store
	armed   atomic.Bool
	claimed atomic.Pointer[readpast.Job]
}

// claim lets the worker claim, once armed.
func (s *claimFirst) claim(ctx context.Context) {
	if !s.armed.CompareAndSwap(true, false) {
		return
	}
	c, err := s.Store.Claim(ctx, readpast.ClaimParams{Queues: []string{"race"}, Worker: "w2", Limit: 1, Lease: time.Minute})
	if err == nil && len(c) == 1 {
		s.claimed.Store(c[0])
	}
}

func (s *claimFirst) Get(ctx context.Context, id int64) (*readpast.Job, error) {
	j, err := s.Store.Get(ctx, id)
	s.claim(ctx)
	return j, err
}

func (s *claimFirst) Cancel(ctx context.Context, id int64) (*readpast.Job, error) {
	s.claim(ctx)
	return s.Store.Cancel(ctx, id)
}

func (s *claimFirst) CancelPending(ctx context.Context, id int64) (*readpast.Job, error) {
	s.claim(ctx)
	return s.Store.CancelPending(ctx, id)
}

// TestGiveUpRacingAClaim: docs/dashboard.md promises "Give up leaves
// alone a job that started running since the page was shown". Two
// retrying jobs are given up together; a worker claims the first between
// the page and the action's cancel. The claimed job stays running under
// its worker, who completes it; the other is given up; the message names
// the claimed job as started running meanwhile. (With the action's Get,
// then Cancel, a claim that committed between the two was cancelled.)
func TestGiveUpRacingAClaim(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dash.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := &claimFirst{Store: st}
	h, err := New(Config{Store: s, Tokens: []string{fullToken}, ReadTokens: []string{readToken}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: s, h: h, srv: httptest.NewServer(h)}
	defer func() { e.srv.Close(); h.Close(); st.Close() }()

	// Two retrying jobs: failed once, due again now.
	var jobs []*readpast.Job
	for _, queue := range []string{"race", "calm"} {
		j := e.enqueue(readpast.EnqueueParams{Kind: "k", Queue: queue, MaxAttempts: 5})
		c, err := st.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Worker: "w1", Limit: 1, Lease: time.Minute})
		if err != nil || len(c) != 1 {
			t.Fatal(c, err)
		}
		if errs, err := st.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: c[0].Token, Message: "boom", RetryAt: time.Now()}}); err != nil || errs[0] != nil {
			t.Fatal(errs, err)
		}
		jobs = append(jobs, j)
	}
	racing, calm := jobs[0], jobs[1]
	page := e.do(req{path: "/retries", token: fullToken})
	if page.status != http.StatusOK {
		t.Fatalf("retries: %d", page.status)
	}
	csrf := csrfOf(t, page.body)

	s.armed.Store(true)
	r := e.do(req{method: "POST", path: "/retries/cancel", token: fullToken,
		form: url.Values{csrfField: {csrf}, "id": {strconv.FormatInt(racing.ID, 10), strconv.FormatInt(calm.ID, 10)}}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("give up: %d", r.status)
	}
	claimed := s.claimed.Load()
	if claimed == nil || claimed.ID != racing.ID {
		t.Fatalf("the racing claim took %+v, want job %d", claimed, racing.ID)
	}
	if got := e.state(racing.ID); got != readpast.StateRunning {
		t.Fatalf("give up of a job claimed meanwhile left it %s, want it running under its worker", got)
	}
	if got := e.state(calm.ID); got != readpast.StateCancelled {
		t.Fatalf("the other job is %s, want it given up (cancelled)", got)
	}
	loc := r.header.Get("Location")
	flash := e.do(req{path: loc, token: fullToken})
	want := "1 job given up (cancelled). Not acted on: job " + strconv.FormatInt(racing.ID, 10) + " (it started running meanwhile)."
	if flash.status != http.StatusOK || !strings.Contains(flash.body, want) {
		t.Fatalf("after give up (%s): %d, want the message %q in:\n%s", loc, flash.status, want, flash.body)
	}
	if errs, err := st.Complete(ctx, []readpast.Completion{{ID: claimed.ID, Token: claimed.Token}}); err != nil || errs[0] != nil {
		t.Fatalf("the worker's completion of the job claimed meanwhile: %v, %v", errs, err)
	}
}
