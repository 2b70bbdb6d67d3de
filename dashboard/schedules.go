package dashboard

import (
	"errors"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// schedulesData is what the schedules page shows.
type schedulesData struct {
	Schedules []*readpast.Schedule
	Now       time.Time
	// CanWrite: the viewer may pause and resume schedules.
	CanWrite bool
	CSRF     string
}

// schedulesPage lists every periodic schedule with its next and last run.
func (h *Handler) schedulesPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	ss, err := h.store.ListSchedules(r.Context())
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := schedulesData{Schedules: ss, Now: h.now(), CanWrite: v.CanWrite(), CSRF: v.csrf}
	h.render(w, r, v, http.StatusOK, "schedules", page{Title: "Schedules", Nav: "schedules", Data: d})
}

// scheduleAction pauses or resumes the schedule named in the path.
func (h *Handler) scheduleAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if action != "pause" && action != "resume" {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	if _, err := h.store.PauseSchedule(ctx, name, action == "pause"); err != nil {
		if errors.Is(err, readpast.ErrScheduleNotFound) {
			h.errorPage(w, r, v, http.StatusNotFound, "There is no such schedule.")
			return
		}
		h.storeError(w, r, v, err)
		return
	}
	h.redirectDone(w, r, "/schedules", "schedule-"+action)
}
