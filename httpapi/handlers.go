package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/readpast/readpast"
	jobcursor "github.com/readpast/readpast/internal/cursor"
	"github.com/readpast/readpast/internal/storekit"
)

func (s *server) enqueue(w http.ResponseWriter, r *http.Request) {
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	p, ae := decodeEnqueue(body, s.now())
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	if ae := s.idempotencyKey(r, &p); ae != nil {
		s.writeError(w, r, ae)
		return
	}
	traceparent, tracestate, ae := traceHeaders(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	jobs, err := s.enqueueTraced(ctx, r, traceparent, tracestate, []readpast.EnqueueParams{p})
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	if len(jobs) != 1 {
		s.writeStoreError(w, r, fmt.Errorf("store returned %d jobs for 1 enqueued", len(jobs)))
		return
	}
	s.metrics.jobsEnqueued(jobs)
	status := http.StatusCreated
	if jobs[0].Duplicate {
		status = http.StatusOK
		if ae := idempotentReplay(r, p, jobs[0]); ae != nil {
			s.writeError(w, r, ae)
			return
		}
	}
	s.writeJSON(w, r, status, NewJob(jobs[0]))
}

func (s *server) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		s.writeError(w, r, fieldError("Idempotency-Key",
			"POST /v1/jobs/batch takes no Idempotency-Key: give each job that needs one a unique_key"))
		return
	}
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ps, ae := decodeBatch(body, s.now(), s.maxBatch)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	traceparent, tracestate, ae := traceHeaders(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	jobs, err := s.enqueueTraced(ctx, r, traceparent, tracestate, ps)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.metrics.jobsEnqueued(jobs)
	status := http.StatusOK // every entry a duplicate: nothing created
	for _, j := range jobs {
		if !j.Duplicate {
			status = http.StatusCreated
		}
	}
	s.writeJSON(w, r, status, JobsResponse{Jobs: NewJobs(jobs)})
}

// list serves GET /v1/jobs within the response budget: it asks the store
// for pages sized by a pager, and when the budget is reached it returns the
// jobs so far with a next_cursor after the last.
func (s *server) list(w http.ResponseWriter, r *http.Request) {
	args, ae := decodeListQuery(r.URL.RawQuery)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	pg := newPager(s.maxResp, int(s.maxBody))
	want, cursor, next := args.Params.Limit, args.Params.Cursor, ""
	for want > 0 {
		q := args.Params
		q.Limit, q.Cursor = pg.next(want), cursor
		res, err := s.store.List(r.Context(), q)
		if err != nil {
			if pg.n == 0 {
				s.writeStoreError(w, r, err)
				return
			}
			// The next request, from the cursor, reports it.
			s.log.WarnContext(r.Context(), "list: a later page failed; answering with the jobs so far", slog.Any("error", err))
			next = cursor
			break
		}
		for _, j := range res.Jobs {
			var v any = NewJob(j)
			if args.Summary {
				v = NewJobSummary(j)
			}
			added, err := pg.add(j, v)
			if err != nil {
				s.writeStoreError(w, r, err)
				return
			}
			if !added {
				break
			}
			cursor = jobcursor.Encode(j.ID)
			want--
		}
		next = res.Next
		if pg.full {
			next = cursor
		}
		if pg.full || res.Next == "" {
			break
		}
		cursor = res.Next
	}
	pg.writeList(s, w, r, next)
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	job, err := s.store.Get(r.Context(), id)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewJob(job))
}

func (s *server) stats(w http.ResponseWriter, r *http.Request) {
	qs, err := s.store.Queues(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewStatsResponse(QueueStatsOf(qs), qs))
}

// jobOp serves POST /v1/jobs/{id}/...: it parses the id and reads the body,
// then calls op with them and a write context (writeContext), and answers
// 200 with what op returns. op reports a bad body as an *apiError; any
// other error is from the store.
func (s *server) jobOp(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, id int64, body []byte) (any, error)) {
	id, ae := pathID(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	out, err := op(ctx, id, body)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

// firstError returns err, or else the first per-item error of a one-item
// Complete or Fail.
func firstError(errs []error, err error) error {
	if err == nil && len(errs) > 0 {
		return errs[0]
	}
	return err
}

// jobAfter returns the job as it is after a change, for the response, and
// passes it to count when count is not nil.
func (s *server) jobAfter(ctx context.Context, id int64, count func(*readpast.Job)) (any, error) {
	job, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if count != nil {
		count(job)
	}
	return NewJob(job), nil
}

func (s *server) complete(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		req, ae := decodeComplete(body)
		if ae != nil {
			return nil, ae
		}
		if err := firstError(s.store.Complete(ctx, []readpast.Completion{{ID: id, Token: req.Token, Result: req.Result}})); err != nil {
			return nil, err
		}
		return s.jobAfter(ctx, id, s.metrics.jobCompleted)
	})
}

func (s *server) fail(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		args, ae := decodeFail(body)
		if ae != nil {
			return nil, ae
		}
		retryAt := args.RetryAt
		if retryAt.IsZero() && !args.Discard {
			// The token pins the attempt: if the job moved on since this
			// Get, the Fail below reports a stale token and changes nothing.
			job, err := s.store.Get(ctx, id)
			if err != nil {
				return nil, err
			}
			retryAt = s.now().Add(readpast.DefaultRetryPolicy(job.Attempt))
		}
		if err := firstError(s.store.Fail(ctx, []readpast.Failure{{
			ID: id, Token: args.Token, Message: args.Message, Stack: args.Stack,
			RetryAt: retryAt, Discard: args.Discard,
		}})); err != nil {
			return nil, err
		}
		return s.jobAfter(ctx, id, s.metrics.jobFailed)
	})
}

func (s *server) heartbeat(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		token, lease, ae := decodeHeartbeat(body)
		if ae != nil {
			return nil, ae
		}
		until, err := s.store.Extend(ctx, id, token, lease)
		if err != nil {
			return nil, err
		}
		return HeartbeatResponse{ID: id, LeaseExpiresAt: until.UTC()}, nil
	})
}

func (s *server) release(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		token, ae := decodeRelease(body)
		if ae != nil {
			return nil, ae
		}
		if err := s.store.Release(ctx, id, token); err != nil {
			return nil, err
		}
		return s.jobAfter(ctx, id, nil)
	})
}

// deleteJob serves DELETE /v1/jobs/{id}: 204, or 409 for a live job.
func (s *server) deleteJob(w http.ResponseWriter, r *http.Request) {
	deleteBy(s, w, r, pathID, s.store.Delete)
}

// deleteBy serves a DELETE of what r's path names (key reads it): 204 once
// del has deleted it, else the error.
func deleteBy[K any](s *server, w http.ResponseWriter, r *http.Request,
	key func(*http.Request) (K, *apiError), del func(context.Context, K) error) {
	k, ae := key(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	if err := del(ctx, k); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeNoContent(w)
}

// snooze serves POST /v1/jobs/{id}/snooze. The limit is checked on the
// job as it is before the snooze: only a write under the claim's token
// changes the count, and a snooze ends that claim, so two snoozes racing
// under one token cannot both pass it (the second finds the token stale).
// A token that is not the current claim's is answered stale_token, as the
// store answers it, whatever the count: its caller's claim is over.
func (s *server) snooze(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		token, d, ae := decodeSnooze(body)
		if ae != nil {
			return nil, ae
		}
		job, err := s.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if job.State == readpast.StateRunning && sameToken(job.Token, token) && job.Snoozes >= s.snoozes {
			return nil, &apiError{Status: http.StatusConflict, Code: CodeSnoozeLimit,
				Message: fmt.Sprintf("the job was snoozed %d times, the server's limit; it is still running under the claim: fail or complete it", job.Snoozes)}
		}
		if err := s.store.Snooze(ctx, id, token, d); err != nil {
			return nil, err
		}
		return s.jobAfter(ctx, id, nil)
	})
}

// bulk serves POST /v1/bulk/{action}. The action runs in batches, each
// committed on its own, for as long as the request lasts: a client that
// goes away stops it between batches, and the batches done stay done.
func (s *server) bulk(w http.ResponseWriter, r *http.Request, action string, op func(context.Context, readpast.JobFilter) (int, error)) {
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	f, ae := decodeBulk(body, action)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	n, err := op(r.Context(), f)
	skipped := []int64{}
	var se *readpast.SkippedError
	if errors.As(err, &se) {
		skipped, err = se.IDs, nil
	}
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, BulkResponse{Count: n, Skipped: skipped})
}

func (s *server) bulkRetry(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, readpast.BulkRetryAction, s.store.BulkRetry)
}

func (s *server) bulkCancel(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, readpast.BulkCancelAction, s.store.BulkCancel)
}

func (s *server) bulkDelete(w http.ResponseWriter, r *http.Request) {
	s.bulk(w, r, readpast.BulkDeleteAction, s.store.BulkDelete)
}

// adminOp serves a body-less operation on one job (retry).
func (s *server) adminOp(w http.ResponseWriter, r *http.Request, op func(context.Context, int64) (*readpast.Job, error)) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		if ae := decodeEmpty(body); ae != nil {
			return nil, ae
		}
		job, err := op(ctx, id)
		if err != nil {
			return nil, err
		}
		return NewJob(job), nil
	})
}

// cancel serves POST /v1/jobs/{id}/cancel: Cancel, or with a token in the
// body CancelClaimed (a worker cancelling its own job, fenced).
func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	s.jobOp(w, r, func(ctx context.Context, id int64, body []byte) (any, error) {
		token, ae := decodeCancel(body)
		if ae != nil {
			return nil, ae
		}
		var (
			job *readpast.Job
			err error
		)
		if token == "" {
			job, err = s.store.Cancel(ctx, id)
		} else {
			job, err = s.store.CancelClaimed(ctx, id, token)
		}
		if err != nil {
			return nil, err
		}
		return NewJob(job), nil
	})
}

func (s *server) retry(w http.ResponseWriter, r *http.Request) { s.adminOp(w, r, s.store.Retry) }

// writeNoContent answers 204 for a deletion, never cached.
func writeNoContent(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// sameToken reports whether a and b name one claim token, however the
// UUID is spelled (case, braces, URN form), as the stores compare them.
func sameToken(a, b string) bool {
	return storekit.CanonToken(a) == storekit.CanonToken(b)
}
