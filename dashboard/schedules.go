package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/readpast/readpast"
)

// schedulesData is what the schedules page shows.
type schedulesData struct {
	Schedules []*readpast.Schedule
	Now       time.Time
	// CanWrite: the viewer may pause, resume and run schedules.
	CanWrite bool
	CSRF     string
	// Ran is the job a "Run now" just made, for the flash (nil: none).
	Ran *scheduleRun
}

// scheduleRun names the job a schedule's "Run now" made.
type scheduleRun struct {
	Schedule string
	JobID    int64
}

// ranFrom reads the job a "Run now" made from the page's query
// (?done=schedule-run&schedule=NAME&job=ID), or nil when the query names
// no job or none of the schedules ss.
func ranFrom(q url.Values, ss []*readpast.Schedule) *scheduleRun {
	id, err := strconv.ParseInt(q.Get("job"), 10, 64)
	if q.Get("done") != "schedule-run" || err != nil || id < 1 {
		return nil
	}
	for _, sc := range ss {
		if sc.Name == q.Get("schedule") {
			return &scheduleRun{Schedule: sc.Name, JobID: id}
		}
	}
	return nil
}

// schedulesPage lists every periodic schedule with its next and last run.
func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	ss, err := h.store.ListSchedules(r.Context())
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := schedulesData{Schedules: ss, Now: h.now(), CanWrite: v.CanWrite(), CSRF: v.csrf, Ran: ranFrom(r.URL.Query(), ss)}
	h.render(w, r, v, http.StatusOK, "schedules", page{Title: "Schedules", Nav: "schedules", Data: d})
}

// scheduleAction pauses, resumes or runs now the schedule named in the
// path. A run enqueues the schedule's job due now, paused or not, and
// leaves the schedule as it was (readpast.RunSchedule): the page then
// names the job made, with a link to it.
func (h *Handler) scheduleAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if action != "pause" && action != "resume" && action != "run" {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	var (
		job *readpast.Job
		err error
	)
	if action == "run" {
		job, err = readpast.RunSchedule(ctx, h.store, name)
	} else {
		_, err = h.store.PauseSchedule(ctx, name, action == "pause")
	}
	if err != nil {
		if errors.Is(err, readpast.ErrScheduleNotFound) {
			h.errorPage(w, r, v, http.StatusNotFound, "There is no such schedule.")
			return
		}
		h.storeError(w, r, v, err)
		return
	}
	if job != nil {
		h.overview.touch()
		h.redirectDoneWith(w, r, "/schedules", "schedule-run", url.Values{"schedule": {name}, "job": {strconv.FormatInt(job.ID, 10)}})
		return
	}
	h.redirectDone(w, r, "/schedules", "schedule-"+action)
}
