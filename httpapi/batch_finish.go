package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/readpast/readpast"
)

// CompleteBatchRequest is the body of POST /v1/jobs/complete: the
// completions of many jobs, written in one transaction.
type CompleteBatchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// CompleteItem is one completion of a CompleteBatchRequest.
type CompleteItem struct {
	ID     int64           `json:"id"`
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result,omitempty"`
}

// CompleteBatchResponse answers POST /v1/jobs/complete: one result per
// completion, in the request's order.
type CompleteBatchResponse struct {
	Results []ItemResult `json:"results"`
}

// ItemResult is the outcome of one item of a batch: OK, or the error it
// would have had alone (stale_token, not_found), with nothing changed for
// it.
type ItemResult struct {
	ID    int64        `json:"id"`
	OK    bool         `json:"ok"`
	Error *ErrorDetail `json:"error,omitempty"`
}

// decodeCompleteBatch decodes the body of POST /v1/jobs/complete; errors
// name the item at fault (jobs[3].token).
func decodeCompleteBatch(body []byte, maxBatch int) ([]readpast.Completion, *apiError) {
	var req CompleteBatchRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return nil, ae
	}
	if len(req.Jobs) == 0 {
		return nil, fieldError("jobs", "must hold at least one completion")
	}
	if len(req.Jobs) > maxBatch {
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBatchTooLarge, Field: "jobs",
			Message: fmt.Sprintf("a batch holds at most %d completions", maxBatch)}
	}
	out := make([]readpast.Completion, 0, len(req.Jobs))
	for i, raw := range req.Jobs {
		prefix := fmt.Sprintf("jobs[%d].", i)
		var item CompleteItem
		if ae := decodeObject(raw, &item, prefix); ae != nil {
			return nil, ae
		}
		if item.ID <= 0 {
			return nil, fieldError(prefix+"id", "must be a job id (a positive integer)")
		}
		// The rest is what POST /v1/jobs/{id}/complete checks.
		req := CompleteRequest{Token: item.Token, Result: item.Result}
		if ae := checkComplete(&req); ae != nil {
			if ae.Field != "" {
				ae.Field = prefix + ae.Field
			}
			return nil, ae
		}
		out = append(out, readpast.Completion{ID: item.ID, Token: req.Token, Result: req.Result})
	}
	return out, nil
}

// completeBatch serves POST /v1/jobs/complete: every completion in one
// Store.Complete call (one transaction, one round trip on PostgreSQL).
// Each item succeeds or fails alone, as it would through
// POST /v1/jobs/{id}/complete: a stale token changes nothing for that job
// and is reported in its result; the answer is 200 whenever the batch was
// written.
func (s *server) completeBatch(w http.ResponseWriter, r *http.Request) {
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	cs, ae := decodeCompleteBatch(body, s.maxBatch)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	errs, err := s.store.Complete(ctx, cs)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := CompleteBatchResponse{Results: make([]ItemResult, len(cs))}
	var done []int64
	for i, c := range cs {
		out.Results[i] = ItemResult{ID: c.ID, OK: errs[i] == nil}
		if errs[i] != nil {
			ae := s.storeError(errs[i])
			out.Results[i].Error = &ErrorDetail{Code: ae.Code, Message: ae.Message, Field: ae.Field}
			continue
		}
		done = append(done, c.ID)
	}
	s.metrics.completedByID(ctx, s.store, done)
	s.writeJSON(w, r, http.StatusOK, out)
}

// inFlightLabels remembers the queue and kind labels of the jobs the
// server's claims handed out, so that a batch completion counts its jobs
// without reading them back. It holds at most max jobs: past that the
// oldest entries are forgotten, and a job not remembered (claimed through
// another server, or forgotten) is read from the store once.
type inFlightLabels struct {
	mu    sync.Mutex
	max   int
	jobs  map[int64][2]string // protected by mu
	order []int64             // a ring of the ids in jobs; protected by mu
	next  int                 // protected by mu
}

func newInFlightLabels(max int) *inFlightLabels {
	return &inFlightLabels{max: max, jobs: make(map[int64][2]string, 64)}
}

func (f *inFlightLabels) add(id int64, queue, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; ok {
		f.jobs[id] = [2]string{queue, kind}
		return
	}
	if len(f.order) < f.max {
		f.order = append(f.order, id)
	} else {
		delete(f.jobs, f.order[f.next])
		f.order[f.next] = id
		f.next = (f.next + 1) % f.max
	}
	f.jobs[id] = [2]string{queue, kind}
}

// take returns and forgets the labels of id.
func (f *inFlightLabels) take(id int64) ([2]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.jobs[id]
	if ok {
		delete(f.jobs, id) // its ring slot is reused in turn
	}
	return l, ok
}

// completedByID counts the completion of each job in ids, by the labels
// its claim through this server left, else by reading the job.
func (m *metrics) completedByID(ctx context.Context, store readpast.Store, ids []int64) {
	if m == nil {
		return
	}
	for _, id := range ids {
		if l, ok := m.inFlight.take(id); ok {
			m.completed.WithLabelValues(m.queues.value(l[0]), m.kinds.value(l[1])).Inc()
			continue
		}
		if j, err := store.Get(ctx, id); err == nil {
			m.completed.WithLabelValues(m.labels(j)).Inc()
		}
	}
}
