package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// claim takes jobs, long-polling up to the request's wait_seconds (see
// waiters).
func (s *server) claim(rw http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, ae := s.readBody(rw, r)
	if ae != nil {
		s.writeError(rw, r, ae)
		return
	}
	args, ae := decodeClaim(body)
	if ae != nil {
		s.writeError(rw, r, ae)
		return
	}
	ctx := r.Context()
	var w *waiter
	var deadline <-chan time.Time
	wait := false // wait for a turn before claiming
	if args.Wait > 0 {
		// Join before the first attempt so a job enqueued between the
		// attempt and the wait still wakes us.
		w = s.waiters.join(ctx, args.Params.Queues)
		defer s.waiters.leave(w)
		_ = http.NewResponseController(rw).SetWriteDeadline(time.Now().Add(args.Wait + s.writeDL))
		timer := time.NewTimer(args.Wait)
		defer timer.Stop()
		deadline = timer.C
		// Others waiting for the same queues found nothing a moment ago:
		// wait with them rather than claim again.
		wait = !s.waiters.claimFirst(w)
	}
	for {
		// The claim itself outlives the client (claimOnce), so never start
		// one for a client that is gone. A select with several ready cases
		// picks one at random, so the check there is not enough.
		if ctx.Err() != nil {
			return
		}
		if wait {
			wait = false
			if !s.awaitTurn(rw, r, w, deadline) {
				return
			}
			continue
		}
		waited := time.Since(arrived) // before the claim: its leases begin later
		pg, jobs, err := s.claimWaiting(r, w, args.Params, args.ParentResults)
		if err != nil {
			s.writeStoreError(rw, r, err)
			return
		}
		if len(jobs) > 0 {
			if ctx.Err() != nil {
				s.releaseJobs(ctx, jobs, "release jobs claimed for a client that went away")
				return
			}
			pg.writeClaim(s, rw, r, waited)
			return
		}
		if w == nil {
			break
		}
		if !s.awaitTurn(rw, r, w, deadline) {
			return
		}
	}
	s.writeJSON(rw, r, http.StatusOK, JobsResponse{Jobs: []Job{}})
}

// awaitTurn waits until w's turn to claim and reports true; or, when the
// wait ends, the server shuts down or the client goes away first, answers
// the claim (with no jobs, unless the client is gone) and reports false.
func (s *server) awaitTurn(rw http.ResponseWriter, r *http.Request, w *waiter, deadline <-chan time.Time) bool {
	select {
	case <-r.Context().Done():
	case <-s.closing:
		s.writeJSON(rw, r, http.StatusOK, JobsResponse{Jobs: []Job{}})
	case <-deadline:
		s.writeJSON(rw, r, http.StatusOK, JobsResponse{Jobs: []Job{}})
	case <-w.turn:
		return true
	}
	return false
}

// claimWaiting is claimBatch for a request waiting as w (nil when it does
// not wait), telling w's group that a claim is in flight, and once it is
// done (or panicked), what it learned.
func (s *server) claimWaiting(r *http.Request, w *waiter, p readpast.ClaimParams, parents bool) (*pager, []*readpast.Job, error) {
	if w == nil {
		pg, jobs, _, err := s.claimBatch(r, p, parents)
		return pg, jobs, err
	}
	s.waiters.claiming(w)
	var (
		jobs   []*readpast.Job
		short  bool
		failed = true
	)
	defer func() { s.waiters.done(w, len(jobs) > 0 && !short, failed) }()
	pg, jobs, short, err := s.claimBatch(r, p, parents)
	failed = err != nil
	return pg, jobs, err
}

// claimBatch claims up to p.Limit jobs for r within the response budget,
// in store calls sized by a pager, and returns them encoded in the pager.
// It stops when a call returns fewer jobs than asked (short: the store had
// no more to give then) or the budget is full;
// jobs claimed that do not fit are released at once, unworked. It returns
// an error only when it claimed nothing: a later call's error ends the
// batch with the jobs claimed so far, which the client must get. With
// parents, each job that runs after others carries its parents' results,
// read in one statement per store call (parentResultsOf); a failed read
// releases that call's jobs.
func (s *server) claimBatch(r *http.Request, p readpast.ClaimParams, parents bool) (pg *pager, claimed []*readpast.Job, short bool, err error) {
	pg = newPager(s.maxResp, int(s.maxBody))
	for want := p.Limit; want > 0 && !pg.full; {
		q := p
		q.Limit = pg.next(want)
		jobs, err := s.claimOnce(r, q)
		if err != nil {
			if len(claimed) == 0 {
				return nil, nil, false, err
			}
			s.log.WarnContext(r.Context(), "claim: a later batch failed; answering with the jobs so far", slog.Any("error", err))
			break
		}
		var results map[int64]map[string]json.RawMessage
		if parents && len(jobs) > 0 {
			if results, err = s.parentResultsOf(r, jobs); err != nil {
				s.releaseJobs(r.Context(), jobs, "release claimed jobs whose parents' results could not be read")
				if len(claimed) == 0 {
					return nil, nil, false, err
				}
				s.log.WarnContext(r.Context(), "claim: reading parent results failed; answering with the jobs so far", slog.Any("error", err))
				break
			}
		}
		var over []*readpast.Job
		for i, j := range jobs {
			wj := NewJob(j)
			wj.Token = j.Token
			wj.ParentResults = results[j.ID]
			added, err := pg.add(j, wj)
			if err != nil {
				s.releaseJobs(r.Context(), append(claimed, jobs[i:]...), "release claimed jobs that could not be encoded")
				return nil, nil, false, err
			}
			if added {
				claimed = append(claimed, j)
			} else {
				over = append(over, j)
			}
		}
		s.releaseJobs(r.Context(), over, "release claimed jobs over the response budget")
		if len(jobs) < q.Limit {
			short = true
			break
		}
		want -= len(jobs)
	}
	return pg, claimed, short, nil
}

// claimOnce makes one Store.Claim call for r and records its metrics. The
// claim runs to its end even if the client disconnects meanwhile (see
// writeContext): cancelled mid-statement, PostgreSQL may still commit it
// while the driver reports an error, which would strand the jobs, running
// for no one, until their lease expires, and cost them an attempt. The
// caller releases jobs claimed for a client that went away.
func (s *server) claimOnce(r *http.Request, p readpast.ClaimParams) ([]*readpast.Job, error) {
	ctx, cancel := writeContext(r)
	defer cancel()
	start := time.Now()
	jobs, err := s.store.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	s.metrics.jobsClaimed(jobs, time.Since(start), s.now())
	return jobs, nil
}

// releaseJobs gives back claimed jobs no client will work on (why says
// which), so they run again at once without using an attempt.
func (s *server) releaseJobs(ctx context.Context, jobs []*readpast.Job, why string) {
	if len(jobs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	for _, j := range jobs {
		if err := s.store.Release(ctx, j.ID, j.Token); err != nil {
			s.log.WarnContext(ctx, why, slog.Int64("job", j.ID), slog.Any("error", err))
		}
	}
}
