package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// Queue is one queue in GET /v1/queues and the answer to a pause or
// resume: whether claims take its jobs, and its job counts.
type Queue struct {
	Name string `json:"name"`
	// Paused: no claim takes its pending jobs until it is resumed.
	Paused bool `json:"paused"`
	// PausedAt is when it was paused; null unless Paused.
	PausedAt *time.Time `json:"paused_at"`
	// Counts holds its jobs per state, every state present, zero included.
	Counts map[readpast.JobState]int64 `json:"counts"`
}

// QueuesResponse is the body of GET /v1/queues: every queue that has jobs
// or is paused, by name.
type QueuesResponse struct {
	Queues []Queue `json:"queues"`
}

// NewQueue converts a store's view of a queue to its wire form.
func NewQueue(q readpast.QueueInfo) Queue {
	out := Queue{Name: q.Name, Paused: q.Paused, Counts: map[readpast.JobState]int64{}}
	if q.PausedAt != nil {
		at := q.PausedAt.UTC()
		out.PausedAt = &at
	}
	for _, s := range readpast.AllStates {
		out.Counts[s] = q.Counts[s]
	}
	return out
}

// NewQueuesResponse converts a store's queues to GET /v1/queues's body.
func NewQueuesResponse(qs []readpast.QueueInfo) QueuesResponse {
	out := QueuesResponse{Queues: make([]Queue, 0, len(qs))}
	for _, q := range qs {
		out.Queues = append(out.Queues, NewQueue(q))
	}
	return out
}

// QueueNamed returns the queue called name from qs, or one without jobs
// that is not paused when qs does not list it.
func QueueNamed(qs []readpast.QueueInfo, name string) Queue {
	for _, q := range qs {
		if q.Name == name {
			return NewQueue(q)
		}
	}
	return NewQueue(readpast.QueueInfo{Name: name})
}

func (s *server) queues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.store.Queues(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewQueuesResponse(qs))
}

func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request) {
	s.queueOp(w, r, s.store.PauseQueue)
}

func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) {
	s.queueOp(w, r, s.store.ResumeQueue)
}

// queueOp serves a body-less operation on the queue named in the path, and
// answers with the queue as it is afterwards.
func (s *server) queueOp(w http.ResponseWriter, r *http.Request, op func(context.Context, string) error) {
	name := r.PathValue("name")
	if err := readpast.CheckQueue(name); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	body, ae := s.readBody(w, r)
	if ae == nil {
		ae = decodeEmpty(body)
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	if err := op(ctx, name); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	qs, err := s.store.Queues(ctx)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, QueueNamed(qs, name))
}
