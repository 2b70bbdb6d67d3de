package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/readpast/readpast/httpapi"
)

// batch is a batch as drivers report it.
type batch struct {
	ID        int64 `json:"id"`
	OnSuccess bool  `json:"on_success"`
	Sealed    bool  `json:"sealed"`
	Finisher  job   `json:"finisher"`
	Members   int   `json:"members"`
	Live      int   `json:"live"`
	Succeeded int   `json:"succeeded"`
	Failed    int   `json:"failed"`
	Cancelled int   `json:"cancelled"`
}

func batchOf(b httpapi.Batch) batch {
	return batch{ID: b.ID, OnSuccess: b.OnSuccess, Sealed: b.Sealed, Finisher: jobOf(b.Finisher), Members: b.Members,
		Live: b.Live, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
}

func batchPath(id int64, action string) string {
	p := "/v1/batches/" + strconv.FormatInt(id, 10)
	if action != "" {
		p += "/" + action
	}
	return p
}

// batchJob decodes one job of a batch strictly into the API's enqueue
// wire type (an unknown field is a mistake in the scenario; the unique
// key fields go as they are, for the server to refuse) and encodes it
// back, to send as it is.
func batchJob(raw json.RawMessage, where string) (json.RawMessage, error) {
	var j httpapi.EnqueueRequest
	if err := decodeArgs(raw, &j); err != nil {
		return nil, badArgsAt(where, err)
	}
	return json.Marshal(j)
}

// openBatch sends POST /v1/batches: {"finisher": args.finisher,
// "on_success": args.on_success}.
func (c *api) openBatch(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Finisher  json.RawMessage `json:"finisher"`
		OnSuccess bool            `json:"on_success"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if len(a.Finisher) == 0 {
		return nil, &errorInfo{Code: "driver_bad_args", Message: "missing argument finisher"}
	}
	fin, err := batchJob(a.Finisher, "finisher")
	if err != nil {
		return nil, err
	}
	var out httpapi.Batch
	body := httpapi.OpenBatchRequest{Finisher: fin, OnSuccess: a.OnSuccess}
	if err := c.call(ctx, "POST", "/v1/batches", nil, body, &out); err != nil {
		return nil, err
	}
	return batchOf(out), nil
}

// addToBatch sends POST /v1/batches/{id}/jobs: {"jobs": args.jobs}.
func (c *api) addToBatch(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		ID   int64             `json:"id"`
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	body := struct {
		Jobs []json.RawMessage `json:"jobs"`
	}{Jobs: make([]json.RawMessage, 0, len(a.Jobs))}
	for i, rawJob := range a.Jobs {
		j, err := batchJob(rawJob, fmt.Sprintf("jobs[%d]", i))
		if err != nil {
			return nil, err
		}
		body.Jobs = append(body.Jobs, j)
	}
	var out httpapi.JobsResponse
	if err := c.call(ctx, "POST", batchPath(a.ID, "jobs"), nil, body, &out); err != nil {
		return nil, err
	}
	return map[string]any{"jobs": jobsOf(out.Jobs)}, nil
}

// sealBatch sends POST /v1/batches/{id}/seal with {}.
func (c *api) sealBatch(ctx context.Context, raw json.RawMessage) (any, error) {
	return c.batchCall(ctx, raw, "POST", "seal", struct{}{})
}

// getBatch sends GET /v1/batches/{id}.
func (c *api) getBatch(ctx context.Context, raw json.RawMessage) (any, error) {
	return c.batchCall(ctx, raw, "GET", "", nil)
}

// batchCall sends method to the batch of args.id (and action) and
// returns the batch of the answer.
func (c *api) batchCall(ctx context.Context, raw json.RawMessage, method, action string, body any) (any, error) {
	var a struct {
		ID int64 `json:"id"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	var out httpapi.Batch
	if err := c.call(ctx, method, batchPath(a.ID, action), nil, body, &out); err != nil {
		return nil, err
	}
	return batchOf(out), nil
}
