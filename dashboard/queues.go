package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// queueAction pauses or resumes the queue named in the path.
func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	name, action := r.PathValue("name"), r.PathValue("action")
	var op func(context.Context, string) error
	switch action {
	case "pause":
		op = h.store.PauseQueue
	case "resume":
		op = h.store.ResumeQueue
	default:
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such action.")
		return
	}
	if err := readpast.CheckQueue(name); err != nil {
		h.storeError(w, r, v, err)
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	if err := op(ctx, name); err != nil {
		h.storeError(w, r, v, err)
		return
	}
	var at *time.Time
	if action == "pause" {
		now := h.now().UTC()
		at = &now
	}
	h.overview.setPaused(name, at)
	h.redirectDone(w, r, "/", action)
}
