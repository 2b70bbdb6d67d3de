package httpapi

import (
	"net/http"

	"github.com/readpast/readpast"
)

// runJob serves POST /v1/jobs/{id}/run: a pending job due now
// (readpast.Store.RunNow). A job due already comes back unchanged; any
// other state is 409 invalid_state, and nothing changes.
func (s *server) runJob(w http.ResponseWriter, r *http.Request) { s.adminOp(w, r, s.store.RunNow) }

// runSchedule serves POST /v1/schedules/{name}/run, which takes no body
// (or an empty object): it enqueues the schedule's job due now, paused or
// not, leaves the schedule as it was (readpast.RunSchedule), and answers
// 201 with the job made.
func (s *server) runSchedule(w http.ResponseWriter, r *http.Request) {
	name, ok := s.scheduleAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	job, err := readpast.RunSchedule(ctx, s.store, name)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.metrics.jobsEnqueued([]*readpast.Job{job})
	s.writeJSON(w, r, http.StatusCreated, NewJob(job))
}
