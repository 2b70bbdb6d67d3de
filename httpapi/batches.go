package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// Batches over HTTP (docs/design/workflows.md, "Batches"): open one with
// its finishing job, add members in any number of calls, seal it, read
// it.

// OpenBatchRequest is the body of POST /v1/batches.
type OpenBatchRequest struct {
	// Finisher is the finishing job: the fields of an EnqueueRequest but
	// the unique key ones.
	Finisher json.RawMessage `json:"finisher"`
	// OnSuccess: the finishing job runs only if every member succeeds
	// (readpast.BatchParams.OnSuccess).
	OnSuccess bool `json:"on_success,omitempty"`
}

// Batch is a batch on the wire (readpast.Batch).
type Batch struct {
	ID        int64 `json:"id"`
	OnSuccess bool  `json:"on_success"`
	Sealed    bool  `json:"sealed"`
	Finisher  Job   `json:"finisher"`
	Members   int   `json:"members"`
	Live      int   `json:"live"`
	Succeeded int   `json:"succeeded"`
	Failed    int   `json:"failed"`
	Cancelled int   `json:"cancelled"`
}

// NewBatch converts b to its wire form.
func NewBatch(b readpast.Batch) Batch {
	out := Batch{ID: b.ID, OnSuccess: b.OnSuccess, Sealed: b.Sealed, Members: b.Members,
		Live: b.Live, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
	if b.Finisher != nil {
		out.Finisher = NewJob(b.Finisher)
	}
	return out
}

// decodeBatchJob decodes one job of a batch (the finishing job or a
// member) at prefix: an EnqueueRequest without unique keys.
func decodeBatchJob(raw json.RawMessage, now time.Time, prefix string) (readpast.EnqueueParams, *apiError) {
	var one EnqueueRequest
	if ae := decodeObject(raw, &one, prefix); ae != nil {
		return readpast.EnqueueParams{}, ae
	}
	if one.UniqueKey != nil || one.UniqueForSeconds != nil {
		field := prefix + "unique_key"
		if one.UniqueKey == nil {
			field = prefix + "unique_for_seconds"
		}
		return readpast.EnqueueParams{}, fieldError(field, "a batch's jobs take no unique key")
	}
	p, ae := one.toParams(now, prefix)
	if ae != nil {
		return p, ae
	}
	if one.RunAt == nil {
		p.RunAt = time.Time{} // now on the store's clock
	}
	return p, nil
}

// batchStore is the store's readpast.BatchStore, or a 500 naming the
// store that keeps no batches.
func (s *server) batchStore() (readpast.BatchStore, *apiError) {
	bs, ok := s.store.(readpast.BatchStore)
	if !ok {
		return nil, &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "this server's store keeps no batches", cause: fmt.Errorf("store %T is not a readpast.BatchStore", s.store)}
	}
	return bs, nil
}

// batchError maps an error of a batch operation on batch id to its
// response: 404 for an unknown batch, 409 for a closed one, naming why.
func (s *server) batchError(err error, id int64) *apiError {
	var closed *readpast.BatchClosedError
	switch {
	case errors.As(err, &closed):
		msg := fmt.Sprintf("batch %d is sealed: no job joins it; nothing was enqueued", id)
		if closed.State != "" {
			msg = fmt.Sprintf("batch %d's finishing job is %s: no job joins it; nothing was enqueued", id, closed.State)
		}
		return &apiError{Status: http.StatusConflict, Code: CodeInvalidState, Message: msg}
	case errors.Is(err, readpast.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf("batch %d not found", id)}
	}
	return s.storeError(err)
}

// openBatch serves POST /v1/batches: 201 with the batch, its finishing
// job blocked until the batch is sealed and every member has ended.
func (s *server) openBatch(w http.ResponseWriter, r *http.Request) {
	bs, ae := s.batchStore()
	if ae == nil && len(r.Header.Values("Idempotency-Key")) > 0 {
		ae = fieldError("Idempotency-Key", "POST /v1/batches takes no Idempotency-Key: a batch's jobs take no unique keys")
	}
	var body []byte
	if ae == nil {
		body, ae = s.readBody(w, r)
	}
	var req OpenBatchRequest
	if ae == nil {
		ae = decodeObject(body, &req, "")
	}
	if ae == nil && len(req.Finisher) == 0 {
		ae = fieldError("finisher", "is required: the job that runs once the batch is sealed and every member has ended")
	}
	var p readpast.BatchParams
	if ae == nil {
		p.OnSuccess = req.OnSuccess
		p.Finisher, ae = decodeBatchJob(req.Finisher, s.now(), "finisher.")
	}
	traceparent, tracestate := "", ""
	if ae == nil {
		traceparent, tracestate, ae = traceHeaders(r)
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	var fin *readpast.Job
	jobs, err := s.insertTraced(ctx, r, traceparent, tracestate, []readpast.EnqueueParams{p.Finisher},
		func(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
			p.Finisher = ps[0]
			j, err := bs.OpenBatch(ctx, p)
			fin = j
			return []*readpast.Job{j}, err
		})
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.metrics.jobsEnqueued(jobs)
	s.writeJSON(w, r, http.StatusCreated, NewBatch(readpast.Batch{ID: fin.ID, OnSuccess: p.OnSuccess, Finisher: fin}))
}

// addToBatch serves POST /v1/batches/{id}/jobs: 201 with the members, in
// request order, all or none.
func (s *server) addToBatch(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	var bs readpast.BatchStore
	if ae == nil {
		bs, ae = s.batchStore()
	}
	if ae == nil && len(r.Header.Values("Idempotency-Key")) > 0 {
		ae = fieldError("Idempotency-Key", "POST /v1/batches/{id}/jobs takes no Idempotency-Key: a batch's jobs take no unique keys")
	}
	var body []byte
	if ae == nil {
		body, ae = s.readBody(w, r)
	}
	var jobs []readpast.EnqueueParams
	if ae == nil {
		jobs, ae = s.decodeBatchJobs(body)
	}
	traceparent, tracestate := "", ""
	if ae == nil {
		traceparent, tracestate, ae = traceHeaders(r)
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	out, err := s.insertTraced(ctx, r, traceparent, tracestate, jobs,
		func(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
			return bs.AddToBatch(ctx, id, ps)
		})
	if err != nil {
		if r.Context().Err() != nil {
			s.writeStoreError(w, r, err) // logs, writes nothing
			return
		}
		s.writeError(w, r, s.batchError(err, id))
		return
	}
	if len(out) != len(jobs) {
		s.writeStoreError(w, r, fmt.Errorf("store returned %d jobs for %d enqueued", len(out), len(jobs)))
		return
	}
	s.metrics.jobsEnqueued(out)
	s.writeJSON(w, r, http.StatusCreated, JobsResponse{Jobs: NewJobs(out)})
}

// decodeBatchJobs decodes the body of POST /v1/batches/{id}/jobs:
// {"jobs": [...]}, at most the server's batch limit (within
// readpast.MaxBatchJoin).
func (s *server) decodeBatchJobs(body []byte) ([]readpast.EnqueueParams, *apiError) {
	var req batchRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return nil, ae
	}
	if len(req.Jobs) == 0 {
		return nil, fieldError("jobs", "must hold at least one job")
	}
	if most := min(s.maxBatch, readpast.MaxBatchJoin); len(req.Jobs) > most {
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBatchTooLarge, Field: "jobs",
			Message: fmt.Sprintf("at most %d jobs join a batch in one request", most)}
	}
	now := s.now()
	out := make([]readpast.EnqueueParams, len(req.Jobs))
	for i, raw := range req.Jobs {
		p, ae := decodeBatchJob(raw, now, fmt.Sprintf("jobs[%d].", i))
		if ae != nil {
			return nil, ae
		}
		out[i] = p
	}
	return out, nil
}

// sealBatch serves POST /v1/batches/{id}/seal: 200 with the batch, sealed
// (sealing twice is sealing once).
func (s *server) sealBatch(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	var bs readpast.BatchStore
	if ae == nil {
		bs, ae = s.batchStore()
	}
	var body []byte
	if ae == nil {
		body, ae = s.readBody(w, r)
	}
	if ae == nil {
		ae = decodeEmpty(body)
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	b, err := bs.SealBatch(ctx, id)
	if err != nil {
		if r.Context().Err() != nil {
			s.writeStoreError(w, r, err)
			return
		}
		s.writeError(w, r, s.batchError(err, id))
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewBatch(b))
}

// getBatch serves GET /v1/batches/{id}: the batch with its members
// counted by state.
func (s *server) getBatch(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	var bs readpast.BatchStore
	if ae == nil {
		bs, ae = s.batchStore()
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	b, err := bs.Batch(r.Context(), id)
	if err != nil {
		if r.Context().Err() != nil {
			s.writeStoreError(w, r, err)
			return
		}
		s.writeError(w, r, s.batchError(err, id))
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewBatch(b))
}
