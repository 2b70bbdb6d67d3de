package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/readpast/readpast"
)

// FlowRequest is the body of POST /v1/flows: jobs enqueued together, with
// edges between them (readpast.FlowJob). Its elements are decoded one by
// one so that errors name the element.
type FlowRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// FlowJobRequest is one job of a FlowRequest: the fields of an
// EnqueueRequest but the unique key ones, a ref by which other jobs of
// the flow name it, and the jobs it runs after.
type FlowJobRequest struct {
	Ref         string          `json:"ref,omitempty"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Queue       string          `json:"queue,omitempty" empty:"no"`
	Priority    *int            `json:"priority,omitempty"`
	RunAt       *string         `json:"run_at,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	Group       *string         `json:"group,omitempty"`
	Keys        []string        `json:"keys,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	// After lists the job's edges, each a FlowEdgeRequest.
	After []json.RawMessage `json:"after,omitempty"`
}

// FlowEdgeRequest is one edge of a FlowJobRequest: the parent, by the ref
// of a job of the same flow or by the id of a job enqueued before
// (exactly one of the two), and the policy that applies when the parent
// ends without succeeding (readpast.EdgePolicy; default cancel_child).
type FlowEdgeRequest struct {
	Ref    string `json:"ref,omitempty"`
	JobID  *int64 `json:"job_id,omitempty"`
	Policy string `json:"policy,omitempty"`
}

// decodeFlow decodes and checks the body of POST /v1/flows (at most
// maxJobs jobs) with readpast.NormalizeFlow.
func decodeFlow(body []byte, now time.Time, maxJobs int) ([]readpast.FlowJob, *apiError) {
	var req FlowRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return nil, ae
	}
	if len(req.Jobs) == 0 {
		return nil, fieldError("jobs", "must hold at least one job")
	}
	if len(req.Jobs) > maxJobs {
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBatchTooLarge, Field: "jobs",
			Message: fmt.Sprintf("a flow holds at most %d jobs", maxJobs)}
	}
	flow := make([]readpast.FlowJob, len(req.Jobs))
	for i, raw := range req.Jobs {
		prefix := fmt.Sprintf("jobs[%d].", i)
		var one FlowJobRequest
		if ae := decodeObject(raw, &one, prefix); ae != nil {
			return nil, ae
		}
		p, ae := EnqueueRequest{Kind: one.Kind, Payload: one.Payload, Queue: one.Queue, Priority: one.Priority,
			RunAt: one.RunAt, MaxAttempts: one.MaxAttempts, Group: one.Group, Keys: one.Keys, Tags: one.Tags}.toParams(now, prefix)
		if ae != nil {
			return nil, ae
		}
		if one.RunAt == nil {
			p.RunAt = time.Time{} // now on the store's clock
		}
		if one.Ref == "" && hasKey(raw, "ref") {
			return nil, fieldError(prefix+"ref", "is empty; leave it out for none")
		}
		fj := readpast.FlowJob{Ref: one.Ref, Job: p}
		if len(one.After) > readpast.MaxParents {
			return nil, fieldError(prefix+"after", "a job runs after at most %d jobs, not %d", readpast.MaxParents, len(one.After))
		}
		for k, rawEdge := range one.After {
			ep := fmt.Sprintf("%safter[%d].", prefix, k)
			var e FlowEdgeRequest
			if ae := decodeObject(rawEdge, &e, ep); ae != nil {
				return nil, ae
			}
			a := readpast.After{Ref: e.Ref, Policy: readpast.EdgePolicy(e.Policy)}
			if e.JobID != nil {
				if *e.JobID <= 0 {
					return nil, fieldError(ep+"job_id", "must be a job id (a positive integer), not %d", *e.JobID)
				}
				a.JobID = *e.JobID
			}
			if e.Ref == "" && hasKey(rawEdge, "ref") {
				return nil, fieldError(ep+"ref", "is empty; leave it out to name the parent by job_id")
			}
			if e.Policy == "" && hasKey(rawEdge, "policy") {
				return nil, fieldError(ep+"policy", "is empty; leave it out for %s", readpast.CancelChild)
			}
			fj.After = append(fj.After, a)
		}
		flow[i] = fj
	}
	out, err := readpast.NormalizeFlow(flow, now)
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return nil, fromFieldError(fe, nil)
		}
		return nil, fieldError("jobs", "%v", err)
	}
	return out, nil
}

// hasKey reports whether the JSON object raw has the key.
func hasKey(raw json.RawMessage, key string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// ParseFlow decodes and checks the body of POST /v1/flows exactly as the
// server does (with readpast.MaxFlowJobs for the server's batch limit).
// The error names the field at fault, such as jobs[1].after[0].ref.
func ParseFlow(data []byte, now time.Time) ([]readpast.FlowJob, error) {
	flow, ae := decodeFlow(data, now, readpast.MaxFlowJobs)
	if ae != nil {
		return nil, ae
	}
	return flow, nil
}

// maxFlowJobs is the most jobs POST /v1/flows takes: the server's batch
// limit, within readpast.MaxFlowJobs.
func (s *server) maxFlowJobs() int { return min(s.maxBatch, readpast.MaxFlowJobs) }

// enqueueFlow serves POST /v1/flows: 201 with the flow's jobs in request
// order, blocked (those with edges) or pending.
func (s *server) enqueueFlow(w http.ResponseWriter, r *http.Request) {
	fs, ok := s.store.(readpast.FlowStore)
	if !ok {
		s.writeError(w, r, &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "this server's store keeps no dependencies between jobs", cause: fmt.Errorf("store %T is not a readpast.FlowStore", s.store)})
		return
	}
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		s.writeError(w, r, fieldError("Idempotency-Key",
			"POST /v1/flows takes no Idempotency-Key: a flow is stored whole or not at all, and its jobs take no unique keys"))
		return
	}
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	flow, ae := decodeFlow(body, s.now(), s.maxFlowJobs())
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
	jobs, err := s.flowTraced(ctx, r, traceparent, tracestate, fs, flow)
	if err != nil {
		if r.Context().Err() != nil {
			s.writeStoreError(w, r, err) // logs, writes nothing
			return
		}
		s.writeError(w, r, s.flowError(err, flow))
		return
	}
	if len(jobs) != len(flow) {
		s.writeStoreError(w, r, fmt.Errorf("store returned %d jobs for %d enqueued", len(jobs), len(flow)))
		return
	}
	s.metrics.jobsEnqueued(jobs)
	s.writeJSON(w, r, http.StatusCreated, JobsResponse{Jobs: NewJobs(jobs)})
}

// flowTraced stores flow through fs as enqueueTraced enqueues jobs: traced
// when the handler has a Tracing, else with r's trace context
// (traceparent, tracestate) stored on each job as it is.
func (s *server) flowTraced(ctx context.Context, r *http.Request, traceparent, tracestate string,
	fs readpast.FlowStore, flow []readpast.FlowJob) ([]*readpast.Job, error) {
	params := make([]readpast.EnqueueParams, len(flow))
	for i := range flow {
		params[i] = flow[i].Job
	}
	insert := func(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
		f := slices.Clone(flow)
		for i := range f {
			f[i].Job = ps[i]
		}
		return fs.EnqueueFlow(ctx, f)
	}
	return s.insertTraced(ctx, r, traceparent, tracestate, params, insert)
}

// flowError maps an error of EnqueueFlow to its response. A parent named
// by job_id that is unknown (404 not_found) or finished (409
// invalid_state), a *readpast.ParentError, is named in the message, and
// its first edge in the field.
func (s *server) flowError(err error, flow []readpast.FlowJob) *apiError {
	var pe *readpast.ParentError
	if !errors.As(err, &pe) {
		return s.storeError(err)
	}
	field := ParentField(flow, pe.ID)
	if pe.State == "" {
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Field: field,
			Message: fmt.Sprintf("parent job %d not found; nothing was enqueued", pe.ID)}
	}
	return &apiError{Status: http.StatusConflict, Code: CodeInvalidState, Field: field,
		Message: fmt.Sprintf("parent job %d is %s already: a job can only run after a blocked, pending or running job; nothing was enqueued", pe.ID, pe.State)}
}

// ParentField names the first edge of flow that names job id as its
// parent ("jobs[i].after[k].job_id"), or "jobs" when none does: the field
// of a *readpast.ParentError.
func ParentField(flow []readpast.FlowJob, id int64) string {
	for i, fj := range flow {
		if k := slices.IndexFunc(fj.After, func(a readpast.After) bool { return a.JobID == id }); k >= 0 {
			return fmt.Sprintf("jobs[%d].after[%d].job_id", i, k)
		}
	}
	return "jobs"
}
