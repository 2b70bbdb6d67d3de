package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// do carries out one operation; see README.md for each one's arguments
// and value.
func (c *api) do(ctx context.Context, op string, raw json.RawMessage) (any, error) {
	ops := map[string]func(context.Context, json.RawMessage) (any, error){
		"enqueue":       c.enqueue,
		"enqueue_batch": c.enqueueBatch,
		"enqueue_flow":  c.enqueueFlow,
		"claim":         c.claim,
		"complete":      c.complete,
		"fail":          c.fail,
		"heartbeat":     c.heartbeat,
		"release":       c.release,
		"snooze":        c.snooze,
		"cancel":        c.cancel,
		"retry":         c.retry,
		"get":           c.get,
		"list":          c.list,
		"relatives":     c.relatives,
		"flow_graph":    c.flowGraph,
		"open_batch":    c.openBatch,
		"add_to_batch":  c.addToBatch,
		"seal_batch":    c.sealBatch,
		"batch":         c.getBatch,
		"raw":           c.raw,
		"long_poll":     c.longPoll,
		"run_worker":    c.runWorker,
	}
	fn, ok := ops[op]
	if !ok {
		return nil, &errorInfo{Code: "unsupported_op", Message: "the Go driver has no operation " + strconv.Quote(op)}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return fn(ctx, raw)
}

// decodeArgs decodes an operation's arguments strictly: an unknown one is
// a mistake in the scenario.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return &errorInfo{Code: "driver_bad_args", Message: err.Error()}
	}
	return nil
}

// badArgsAt names where in the arguments decodeArgs failed.
func badArgsAt(where string, err error) error {
	msg := err.Error()
	var ei *errorInfo
	if errors.As(err, &ei) {
		msg = ei.Message
	}
	return &errorInfo{Code: "driver_bad_args", Message: where + ": " + msg}
}

// enqueueArgs are the arguments of enqueue and of each job of
// enqueue_batch.
type enqueueArgs struct {
	Kind             string          `json:"kind"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	Queue            string          `json:"queue,omitempty"`
	Priority         *int            `json:"priority,omitempty"`
	RunInSeconds     *float64        `json:"run_in_seconds,omitempty"`
	MaxAttempts      *int            `json:"max_attempts,omitempty"`
	Group            *string         `json:"group,omitempty"`
	Keys             []string        `json:"keys,omitempty"`
	UniqueKey        *string         `json:"unique_key,omitempty"`
	UniqueForSeconds *float64        `json:"unique_for_seconds,omitempty"`
	Tags             []string        `json:"tags,omitempty"`
	IdempotencyKey   *string         `json:"idempotency_key,omitempty"`
}

func (a enqueueArgs) request() httpapi.EnqueueRequest {
	r := httpapi.EnqueueRequest{
		Kind: a.Kind, Payload: a.Payload, Queue: a.Queue, Priority: a.Priority, MaxAttempts: a.MaxAttempts,
		Group: a.Group, Keys: a.Keys, UniqueKey: a.UniqueKey, UniqueForSeconds: a.UniqueForSeconds, Tags: a.Tags,
	}
	if a.RunInSeconds != nil {
		at := timeOf(time.Now().Add(time.Duration(*a.RunInSeconds * float64(time.Second))))
		r.RunAt = &at
	}
	return r
}

func (c *api) enqueue(ctx context.Context, raw json.RawMessage) (any, error) {
	var a enqueueArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var h http.Header
	if a.IdempotencyKey != nil {
		h = http.Header{"Idempotency-Key": {*a.IdempotencyKey}}
	}
	var out httpapi.Job
	if err := c.call(ctx, "POST", "/v1/jobs", h, a.request(), &out); err != nil {
		return nil, err
	}
	return jobOf(out), nil
}

func (c *api) enqueueBatch(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Jobs []enqueueArgs `json:"jobs"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	body := struct {
		Jobs []httpapi.EnqueueRequest `json:"jobs"`
	}{}
	for _, j := range a.Jobs {
		if j.IdempotencyKey != nil {
			return nil, &errorInfo{Code: "driver_bad_args", Message: "a batch takes no idempotency_key"}
		}
		body.Jobs = append(body.Jobs, j.request())
	}
	var out httpapi.JobsResponse
	if err := c.call(ctx, "POST", "/v1/jobs/batch", nil, body, &out); err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobsOf(out.Jobs)}, nil
}

// enqueueFlow sends the body of POST /v1/flows, {"jobs": args.jobs}: each
// job and each of its edges decoded strictly into the API's wire types
// (an unknown field is a mistake in the scenario), then sent as they are.
func (c *api) enqueueFlow(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	body := httpapi.FlowRequest{Jobs: make([]json.RawMessage, 0, len(a.Jobs))}
	for i, rawJob := range a.Jobs {
		var j httpapi.FlowJobRequest
		if err := decodeArgs(rawJob, &j); err != nil {
			return nil, badArgsAt(fmt.Sprintf("jobs[%d]", i), err)
		}
		for k, rawEdge := range j.After {
			var e httpapi.FlowEdgeRequest
			if err := decodeArgs(rawEdge, &e); err != nil {
				return nil, badArgsAt(fmt.Sprintf("jobs[%d].after[%d]", i, k), err)
			}
			b, err := json.Marshal(e)
			if err != nil {
				return nil, err
			}
			j.After[k] = b
		}
		b, err := json.Marshal(j)
		if err != nil {
			return nil, err
		}
		body.Jobs = append(body.Jobs, b)
	}
	var out httpapi.JobsResponse
	if err := c.call(ctx, "POST", "/v1/flows", nil, body, &out); err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobsOf(out.Jobs)}, nil
}

func (c *api) claim(ctx context.Context, raw json.RawMessage) (any, error) {
	var a httpapi.ClaimRequest
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	jobs, err := c.claimJobs(ctx, a)
	if err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobsOf(jobs)}, nil
}

func (c *api) claimJobs(ctx context.Context, a httpapi.ClaimRequest) ([]httpapi.Job, error) {
	var out httpapi.JobsResponse
	if err := c.call(ctx, "POST", "/v1/claim", nil, a, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// tokenArgs name a job and the claim token of a worker's call.
type tokenArgs struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
}

func jobPath(id int64, action string) string {
	p := "/v1/jobs/" + strconv.FormatInt(id, 10)
	if action != "" {
		p += "/" + action
	}
	return p
}

func (c *api) complete(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		tokenArgs
		Result json.RawMessage `json:"result,omitempty"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return c.jobCall(ctx, jobPath(a.ID, "complete"), httpapi.CompleteRequest{Token: a.Token, Result: a.Result})
}

func (c *api) fail(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		tokenArgs
		Error          string   `json:"error"`
		RetryInSeconds *float64 `json:"retry_in_seconds,omitempty"`
		Discard        bool     `json:"discard,omitempty"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	body := httpapi.FailRequest{Token: a.Token, Error: &a.Error, Discard: a.Discard}
	if a.RetryInSeconds != nil {
		at := timeOf(time.Now().Add(time.Duration(*a.RetryInSeconds * float64(time.Second))))
		body.RetryAt = &at
	}
	return c.jobCall(ctx, jobPath(a.ID, "fail"), body)
}

func (c *api) heartbeat(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		tokenArgs
		LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var out httpapi.HeartbeatResponse
	body := httpapi.HeartbeatRequest{Token: a.Token, LeaseSeconds: a.LeaseSeconds}
	if err := c.call(ctx, "POST", jobPath(a.ID, "heartbeat"), nil, body, &out); err != nil {
		return nil, err
	}
	return map[string]any{"lease_expires_at": timeOf(out.LeaseExpiresAt)}, nil
}

func (c *api) release(ctx context.Context, raw json.RawMessage) (any, error) {
	var a tokenArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return c.jobCall(ctx, jobPath(a.ID, "release"), httpapi.ReleaseRequest{Token: a.Token})
}

func (c *api) snooze(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		tokenArgs
		Seconds float64 `json:"seconds"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return c.jobCall(ctx, jobPath(a.ID, "snooze"), httpapi.SnoozeRequest{Token: a.Token, Seconds: &a.Seconds})
}

// cancel is POST /v1/jobs/{id}/cancel, with the claim token when given.
func (c *api) cancel(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		ID    int64   `json:"id"`
		Token *string `json:"token"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return c.jobCall(ctx, jobPath(a.ID, "cancel"), httpapi.CancelRequest{Token: a.Token})
}

// retry is POST /v1/jobs/{id}/retry with {}.
func (c *api) retry(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		ID int64 `json:"id"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	return c.jobCall(ctx, jobPath(a.ID, "retry"), struct{}{})
}

// jobCall POSTs body to path and returns the job of the answer.
func (c *api) jobCall(ctx context.Context, path string, body any) (any, error) {
	var out httpapi.Job
	if err := c.call(ctx, "POST", path, nil, body, &out); err != nil {
		return nil, err
	}
	return jobOf(out), nil
}

func (c *api) get(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		ID int64 `json:"id"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var out httpapi.Job
	if err := c.call(ctx, "GET", jobPath(a.ID, ""), nil, nil, &out); err != nil {
		return nil, err
	}
	return jobOf(out), nil
}

func (c *api) list(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Queue string `json:"queue"`
		State string `json:"state"`
		Kind  string `json:"kind"`
		Group string `json:"group"`
		Tag   string `json:"tag"`
		Limit int    `json:"limit"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	q := url.Values{}
	for k, v := range map[string]string{"queue": a.Queue, "state": a.State, "kind": a.Kind, "group": a.Group, "tag": a.Tag} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if a.Limit != 0 {
		q.Set("limit", strconv.Itoa(a.Limit))
	}
	var out httpapi.JobsResponse
	if err := c.call(ctx, "GET", "/v1/jobs?"+q.Encode(), nil, nil, &out); err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobsOf(out.Jobs), "next_cursor": out.NextCursor}, nil
}

// idLimitArgs name a job and an optional limit.
type idLimitArgs struct {
	ID    int64 `json:"id"`
	Limit int   `json:"limit"`
}

func (a idLimitArgs) path(action string) string {
	p := jobPath(a.ID, action)
	if a.Limit != 0 {
		p += "?limit=" + strconv.Itoa(a.Limit)
	}
	return p
}

// edge is an edge as drivers report it.
type edge struct {
	ParentID  int64   `json:"parent_id"`
	ChildID   int64   `json:"child_id"`
	ParentRef *string `json:"parent_ref"`
	ChildRef  *string `json:"child_ref"`
	Policy    string  `json:"policy"`
	State     string  `json:"state"`
}

func edgeOf(e readpast.Edge) edge {
	return edge{ParentID: e.ParentID, ChildID: e.ChildID, ParentRef: orNull(e.ParentRef), ChildRef: orNull(e.ChildRef),
		Policy: string(e.Policy), State: string(e.State)}
}

func (c *api) relatives(ctx context.Context, raw json.RawMessage) (any, error) {
	var a idLimitArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var out httpapi.RelativesResponse
	if err := c.call(ctx, "GET", a.path("relatives"), nil, nil, &out); err != nil {
		return nil, err
	}
	side := func(rs []httpapi.RelativeJob) []map[string]any {
		l := make([]map[string]any, 0, len(rs))
		for _, r := range rs {
			var j any
			if r.Job != nil {
				j = jobOf(*r.Job)
			}
			l = append(l, map[string]any{"edge": edgeOf(r.Edge), "job": j})
		}
		return l
	}
	return map[string]any{"parents": side(out.Parents), "children": side(out.Children)}, nil
}

func (c *api) flowGraph(ctx context.Context, raw json.RawMessage) (any, error) {
	var a idLimitArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var out httpapi.FlowGraphResponse
	if err := c.call(ctx, "GET", a.path("flow"), nil, nil, &out); err != nil {
		return nil, err
	}
	edges := make([]edge, 0, len(out.Edges))
	for _, e := range out.Edges {
		edges = append(edges, edgeOf(e))
	}
	return map[string]any{"jobs": jobsOf(out.Jobs), "edges": edges, "truncated": out.Truncated}, nil
}

// raw sends a request as the scenario wrote it: for bad input.
func (c *api) raw(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Method   string            `json:"method"`
		Path     string            `json:"path"`
		Headers  map[string]string `json:"headers"`
		Body     *string           `json:"body"`
		BodyJSON json.RawMessage   `json:"body_json"`
		Pad      *struct {
			Marker string `json:"marker"`
			Unit   string `json:"unit"`
			Count  int    `json:"count"`
		} `json:"pad"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var body []byte
	switch {
	case a.Body != nil:
		s := *a.Body
		if a.Pad != nil {
			s = strings.Replace(s, a.Pad.Marker, strings.Repeat(a.Pad.Unit, a.Pad.Count), 1)
		}
		body = []byte(s)
	case a.BodyJSON != nil:
		body = a.BodyJSON
	}
	h := http.Header{}
	for k, v := range a.Headers {
		h.Set(k, v)
	}
	status, b, err := c.send(ctx, a.Method, a.Path, h, body)
	if err != nil {
		return nil, err
	}
	if status >= 300 {
		return nil, apiError(status, b)
	}
	var v any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s %s: the answer is not JSON: %w", a.Method, a.Path, err)
		}
	}
	return map[string]any{"status": status, "body": v}, nil
}

// longPoll starts a claim that waits, enqueues a job after a pause, and
// measures how long after the enqueue was sent the claim answered.
func (c *api) longPoll(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Worker              string   `json:"worker"`
		Queue               string   `json:"queue"`
		Kind                string   `json:"kind"`
		WaitSeconds         float64  `json:"wait_seconds"`
		LeaseSeconds        *float64 `json:"lease_seconds"`
		EnqueueAfterSeconds float64  `json:"enqueue_after_seconds"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	type claimed struct {
		jobs []httpapi.Job
		err  error
		at   time.Time
	}
	done := make(chan claimed, 1)
	go func() {
		jobs, err := c.claimJobs(ctx, httpapi.ClaimRequest{Worker: a.Worker, Queues: []string{a.Queue},
			WaitSeconds: &a.WaitSeconds, LeaseSeconds: a.LeaseSeconds})
		done <- claimed{jobs, err, time.Now()}
	}()
	select {
	case r := <-done:
		return nil, &errorInfo{Code: "driver_error", Message: fmt.Sprintf("the claim answered before the enqueue: %v %v", r.jobs, r.err)}
	case <-time.After(time.Duration(a.EnqueueAfterSeconds * float64(time.Second))):
	}
	sent := time.Now()
	var j httpapi.Job
	if err := c.call(ctx, "POST", "/v1/jobs", nil, httpapi.EnqueueRequest{Kind: a.Kind, Queue: a.Queue}, &j); err != nil {
		return nil, err
	}
	answered := time.Now()
	r := <-done
	if r.err != nil {
		return nil, r.err
	}
	return map[string]any{
		"jobs":        jobsOf(r.jobs),
		"enqueued_id": j.ID,
		"enqueue_ms":  float64(answered.Sub(sent).Microseconds()) / 1000,
		"wake_ms":     float64(r.at.Sub(answered).Microseconds()) / 1000,
	}, nil
}
