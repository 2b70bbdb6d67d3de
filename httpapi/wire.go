package httpapi

import (
	"encoding/json"
	"time"

	"github.com/readpast/readpast"
)

// Job is a job as the API sends it: readpast.Job's own JSON form, with
// times in UTC, a missing payload as {} and an empty group as null, plus
// the claim token in claim responses. There is one JSON shape of a job;
// this type only adds the token, which readpast.Job never serializes.
type Job struct {
	readpast.Job
	// Token is set only in claim responses: the claim token the worker
	// passes back to complete, fail, heartbeat or release the job.
	Token string `json:"token,omitempty"`
	// ParentResults is set only in the responses of claims that ask for
	// it (ClaimRequest.ParentResults), on jobs that run after others: the
	// results of the job's parents by their refs in its flow (a parent
	// named by id, or without a ref, by its id in decimal); null for a
	// parent that has not succeeded or stored no result.
	ParentResults map[string]json.RawMessage `json:"parent_results,omitempty"`
}

// NewJob converts a stored job to its wire form. The claim token is left
// out; claim responses set it themselves.
func NewJob(j *readpast.Job) Job {
	w := Job{Job: *j}
	w.RunAt = j.RunAt.UTC()
	w.CreatedAt = j.CreatedAt.UTC()
	w.StartedAt = utcPtr(j.StartedAt)
	w.FinishedAt = utcPtr(j.FinishedAt)
	w.LeaseExpiresAt = utcPtr(j.LeaseExpiresAt)
	w.UniqueUntil = utcPtr(j.UniqueUntil)
	w.Tags = tagsOf(j)
	if len(w.Payload) == 0 {
		w.Payload = json.RawMessage("{}")
	}
	if w.Group != nil && *w.Group == "" {
		w.Group = nil
	}
	w.Errors = make([]readpast.AttemptError, 0, len(j.Errors))
	for _, e := range j.Errors {
		e.At = e.At.UTC()
		w.Errors = append(w.Errors, e)
	}
	return w
}

// JobSummary is a job without its payload, result and errors: what GET
// /v1/jobs?summary=true lists, for views that do not need them.
type JobSummary struct {
	ID             int64             `json:"id"`
	Queue          string            `json:"queue"`
	Kind           string            `json:"kind"`
	Priority       int               `json:"priority"`
	State          readpast.JobState `json:"state"`
	Attempt        int               `json:"attempt"`
	MaxAttempts    int               `json:"max_attempts"`
	RunAt          time.Time         `json:"run_at"`
	Group          *string           `json:"group"`
	Keys           []string          `json:"keys,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	Worker         string            `json:"worker,omitempty"`
	StartedAt      *time.Time        `json:"started_at,omitempty"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
	LeaseExpiresAt *time.Time        `json:"lease_expires_at,omitempty"`
	Tags           []string          `json:"tags"`
	Snoozes        int               `json:"snoozes"`
}

// tagsOf returns j's tags; never nil.
func tagsOf(j *readpast.Job) []string {
	if j.Tags == nil {
		return []string{}
	}
	return j.Tags
}

// NewJobSummary converts a stored job to its summary wire form.
func NewJobSummary(j *readpast.Job) JobSummary {
	group := j.Group
	if group != nil && *group == "" {
		group = nil
	}
	return JobSummary{
		ID:             j.ID,
		Queue:          j.Queue,
		Kind:           j.Kind,
		Priority:       j.Priority,
		State:          j.State,
		Attempt:        j.Attempt,
		MaxAttempts:    j.MaxAttempts,
		RunAt:          j.RunAt.UTC(),
		Group:          group,
		Keys:           j.Keys,
		CreatedAt:      j.CreatedAt.UTC(),
		Worker:         j.Worker,
		StartedAt:      utcPtr(j.StartedAt),
		FinishedAt:     utcPtr(j.FinishedAt),
		LeaseExpiresAt: utcPtr(j.LeaseExpiresAt),
		Tags:           tagsOf(j),
		Snoozes:        j.Snoozes,
	}
}

// NewJobs converts stored jobs to their wire form; never nil.
func NewJobs(js []*readpast.Job) []Job {
	out := make([]Job, 0, len(js))
	for _, j := range js {
		out = append(out, NewJob(j))
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// JobsResponse is the body of the batch enqueue, claim and list responses.
type JobsResponse struct {
	Jobs []Job `json:"jobs"`
	// NextCursor continues a listing; null at the end. Only list sets it.
	NextCursor *string `json:"next_cursor,omitempty"`
	// WaitedSeconds is how long the server held a claim before the claim
	// that took its jobs began (rounded down to the millisecond): a
	// worker's lease counted from when it sent the claim plus this never
	// ends later than the server's. Only a claim that took jobs sets it.
	WaitedSeconds *float64 `json:"waited_seconds,omitempty"`
}

// HeartbeatResponse is the body of a heartbeat response.
type HeartbeatResponse struct {
	ID             int64     `json:"id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// StatsResponse is the body of GET /v1/stats: job counts per queue and
// state (every state present, zero included), the totals per state, and
// the paused queues.
type StatsResponse struct {
	Queues map[string]map[readpast.JobState]int64 `json:"queues"`
	Totals map[readpast.JobState]int64            `json:"totals"`
	// Paused names the paused queues, sorted; a paused queue without jobs
	// is here and not in Queues.
	Paused []string `json:"paused"`
}

// NewStatsResponse groups store stats per queue, filling every state, and
// lists the paused queues among qs (from Store.Queues; nil for none).
func NewStatsResponse(stats []readpast.QueueStats, qs []readpast.QueueInfo) StatsResponse {
	out := StatsResponse{
		Queues: map[string]map[readpast.JobState]int64{},
		Totals: map[readpast.JobState]int64{},
		Paused: []string{},
	}
	for _, s := range readpast.AllStates {
		out.Totals[s] = 0
	}
	for _, st := range stats {
		q, ok := out.Queues[st.Queue]
		if !ok {
			q = map[readpast.JobState]int64{}
			for _, s := range readpast.AllStates {
				q[s] = 0
			}
			out.Queues[st.Queue] = q
		}
		q[st.State] += st.Count
		out.Totals[st.State] += st.Count
	}
	for _, q := range qs {
		if q.Paused {
			out.Paused = append(out.Paused, q.Name)
		}
	}
	return out
}

// QueueStatsOf flattens Store.Queues's counts back to per-state stats.
func QueueStatsOf(qs []readpast.QueueInfo) []readpast.QueueStats {
	var out []readpast.QueueStats
	for _, q := range qs {
		for _, s := range readpast.AllStates {
			if n := q.Counts[s]; n > 0 {
				out = append(out, readpast.QueueStats{Queue: q.Name, State: s, Count: n})
			}
		}
	}
	return out
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable machine-readable code, a
// human-readable message and, for a bad request, the field at fault.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}
