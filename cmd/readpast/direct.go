package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// direct is a backend on a database opened directly (--database-url). It
// answers what the HTTP API would, in the same wire form.
type direct struct {
	store   readpast.Store
	timeout time.Duration
}

func (d *direct) close() error { return d.store.Close() }

func (d *direct) enqueue(ctx context.Context, jobs []json.RawMessage) ([]httpapi.Job, error) {
	now := time.Now()
	ps := make([]readpast.EnqueueParams, len(jobs))
	for i, raw := range jobs {
		p, err := httpapi.ParseEnqueue(raw, now)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	out, err := d.store.Enqueue(ctx, ps)
	if err != nil {
		return nil, err
	}
	return httpapi.NewJobs(out), nil
}

func (d *direct) list(ctx context.Context, p readpast.ListParams, summary bool) (listPage, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	res, err := d.store.List(ctx, p)
	if err != nil {
		return listPage{}, err
	}
	page := listPage{Jobs: make([]json.RawMessage, 0, len(res.Jobs))}
	for _, j := range res.Jobs {
		var v any = httpapi.NewJob(j)
		if summary {
			v = httpapi.NewJobSummary(j)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return listPage{}, fmt.Errorf("encode job %d: %w", j.ID, err)
		}
		page.Jobs = append(page.Jobs, b)
	}
	if res.Next != "" {
		page.NextCursor = &res.Next
	}
	return page, nil
}

func (d *direct) job(ctx context.Context, action string, id int64) (httpapi.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var j *readpast.Job
	var err error
	switch action {
	case "show":
		j, err = d.store.Get(ctx, id)
	case "cancel":
		j, err = d.store.Cancel(ctx, id)
	case "retry":
		j, err = d.store.Retry(ctx, id)
	case "run":
		j, err = d.store.RunNow(ctx, id)
	default:
		return httpapi.Job{}, fmt.Errorf("unknown action %q", action)
	}
	if err != nil {
		return httpapi.Job{}, err
	}
	return httpapi.NewJob(j), nil
}

func (d *direct) deleteJob(ctx context.Context, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.store.Delete(ctx, id)
}

// bulk runs without the per-request timeout: a bulk action works in
// batches for as long as it takes, and Ctrl-C stops it between batches.
func (d *direct) bulk(ctx context.Context, action string, f readpast.JobFilter) (int, error) {
	switch action {
	case readpast.BulkRetryAction:
		return d.store.BulkRetry(ctx, f)
	case readpast.BulkCancelAction:
		return d.store.BulkCancel(ctx, f)
	case readpast.BulkDeleteAction:
		return d.store.BulkDelete(ctx, f)
	}
	return 0, fmt.Errorf("unknown bulk action %q", action)
}

func (d *direct) stats(ctx context.Context) (httpapi.StatsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	qs, err := d.store.Queues(ctx)
	if err != nil {
		return httpapi.StatsResponse{}, err
	}
	return httpapi.NewStatsResponse(httpapi.QueueStatsOf(qs), qs), nil
}

func (d *direct) queues(ctx context.Context) (httpapi.QueuesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	qs, err := d.store.Queues(ctx)
	if err != nil {
		return httpapi.QueuesResponse{}, err
	}
	return httpapi.NewQueuesResponse(qs), nil
}

func (d *direct) queue(ctx context.Context, action, name string) (httpapi.Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	op := d.store.PauseQueue
	if action == "resume" {
		op = d.store.ResumeQueue
	}
	if err := op(ctx, name); err != nil {
		return httpapi.Queue{}, err
	}
	qs, err := d.store.Queues(ctx)
	if err != nil {
		return httpapi.Queue{}, err
	}
	return httpapi.QueueNamed(qs, name), nil
}

func (d *direct) schedules(ctx context.Context) ([]httpapi.Schedule, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	scs, err := d.store.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.Schedule, 0, len(scs))
	for _, sc := range scs {
		out = append(out, httpapi.NewSchedule(sc))
	}
	return out, nil
}

func (d *direct) schedule(ctx context.Context, name string) (httpapi.Schedule, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	sc, err := d.store.GetSchedule(ctx, name)
	if err != nil {
		return httpapi.Schedule{}, err
	}
	runs, err := d.store.ScheduleRuns(ctx, name, readpast.ScheduleRunsKept)
	if err != nil {
		return httpapi.Schedule{}, err
	}
	out := httpapi.NewSchedule(sc)
	out.Runs = runs
	return out, nil
}

func (d *direct) putSchedule(ctx context.Context, name string, body json.RawMessage) (httpapi.Schedule, bool, error) {
	p, err := httpapi.ParsePutSchedule(name, body, time.Now())
	if err != nil {
		return httpapi.Schedule{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	sc, created, err := d.store.PutSchedule(ctx, p)
	if err != nil {
		return httpapi.Schedule{}, false, err
	}
	return httpapi.NewSchedule(sc), created, nil
}

func (d *direct) deleteSchedule(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.store.DeleteSchedule(ctx, name)
}

func (d *direct) pauseSchedule(ctx context.Context, name string, paused bool) (httpapi.Schedule, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	sc, err := d.store.PauseSchedule(ctx, name, paused)
	if err != nil {
		return httpapi.Schedule{}, err
	}
	return httpapi.NewSchedule(sc), nil
}

func (d *direct) runSchedule(ctx context.Context, name string) (httpapi.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	j, err := readpast.RunSchedule(ctx, d.store, name)
	if err != nil {
		return httpapi.Job{}, err
	}
	return httpapi.NewJob(j), nil
}

func (d *direct) limits(ctx context.Context) (httpapi.LimitsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	ls, err := d.store.ListLimits(ctx)
	if err != nil {
		return httpapi.LimitsResponse{}, err
	}
	return httpapi.NewLimitsResponse(ls), nil
}

func (d *direct) limit(ctx context.Context, key string) (httpapi.LimitInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	li, err := d.store.GetLimit(ctx, key)
	if err != nil {
		return httpapi.LimitInfo{}, err
	}
	return httpapi.NewLimitInfo(*li), nil
}

func (d *direct) putLimit(ctx context.Context, key string, body json.RawMessage) (httpapi.Limit, bool, error) {
	l, err := httpapi.ParsePutLimit(key, body)
	if err != nil {
		return httpapi.Limit{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	created, err := d.store.PutLimit(ctx, l)
	if err != nil {
		return httpapi.Limit{}, false, err
	}
	return httpapi.NewLimit(l), created, nil
}

func (d *direct) deleteLimit(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.store.DeleteLimit(ctx, key)
}

func (d *direct) takeTokens(ctx context.Context, key string, n int) (httpapi.TokenGrant, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	g, err := d.store.TakeTokens(ctx, key, n)
	if err != nil {
		return httpapi.TokenGrant{}, err
	}
	return httpapi.NewTokenGrant(g), nil
}
