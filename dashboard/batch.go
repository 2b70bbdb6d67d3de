package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"

	"github.com/readpast/readpast"
)

// batchView is the Batch panel of a batch's finishing job's page
// (docs/design/workflows.md, "Batches").
type batchView struct {
	readpast.Batch
	// Status is "open", "sealed" (the finishing job waits for its
	// members) or "closed" (the finishing job has left blocked: released
	// or ended); Help says what it means.
	Status, Help string
	// Total is Members; Counts are the members by state, in lifecycle
	// order.
	Total  int64
	Counts []batchCount
	// MembersURL lists the members: the flow page, when there are any
	// (the job list has no filter for a job's parents).
	MembersURL template.URL
	// Seal is the action that seals the batch, offered while it is open
	// (no Name otherwise).
	Seal jobAction
}

// batchCount is how many members of a batch are in a state (live stands
// for blocked, pending and running).
type batchCount struct {
	ID string
	N  int64
}

// batchOf fills d's Batch panel when d.Job finishes a batch, with one
// read (BatchStore.Batch) for a job that may: one that is blocked or runs
// after others (a finishing job waits for its seal and its members, and
// keeps their edges once released). Any other job costs no read.
func (h *Handler) batchOf(r *http.Request, d *jobData) error {
	if h.batches == nil || (d.Job.State != readpast.StateBlocked && len(d.Parents) == 0) {
		return nil
	}
	b, err := h.batches.Batch(r.Context(), d.Job.ID)
	if errors.Is(err, readpast.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("batch of job %d: %w", d.Job.ID, err)
	}
	v := &batchView{Batch: b, Total: int64(b.Members), Counts: []batchCount{
		{ID: "live", N: int64(b.Live)},
		{ID: string(readpast.StateSucceeded), N: int64(b.Succeeded)},
		{ID: string(readpast.StateFailed), N: int64(b.Failed)},
		{ID: string(readpast.StateCancelled), N: int64(b.Cancelled)},
	}}
	state := readpast.StateBlocked
	if b.Finisher != nil {
		state = b.Finisher.State
	}
	switch {
	case !b.Sealed:
		v.Status, v.Help = "open", "Jobs may still join it. Its finishing job waits for the seal, then for every member to end."
		v.Seal = jobAction{Name: "seal", Label: "Seal",
			Help: "No job joins it after this; its finishing job is released once every member has ended (at once if none is left)."}
	case state == readpast.StateBlocked:
		v.Status, v.Help = "sealed", "No job joins it; its finishing job is released once every member has ended."
	default:
		v.Status, v.Help = "closed", "No job joins it: its finishing job has left blocked (now "+string(state)+")."
	}
	if b.Members > 0 && d.FlowURL != "" {
		v.MembersURL = d.FlowURL
	}
	d.Batch = v
	return nil
}

// sealBatch seals batch id (the seal action on its finishing job's page)
// and goes back to the page, which says whether the finishing job was
// released.
func (h *Handler) sealBatch(w http.ResponseWriter, r *http.Request, v *viewer, id int64) {
	if h.batches == nil {
		h.errorPage(w, r, v, http.StatusNotFound, "This store keeps no batches.")
		return
	}
	ctx, cancel := storeContext(r)
	defer cancel()
	b, err := h.batches.SealBatch(ctx, id)
	if errors.Is(err, readpast.ErrNotFound) {
		h.errorPage(w, r, v, http.StatusNotFound, fmt.Sprintf("There is no such batch: job %d finishes none.", id))
		return
	}
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	h.overview.touch()
	done := "seal"
	if b.Finisher != nil {
		switch {
		case b.Finisher.State.Final():
			done = "seal-ended"
		case b.Finisher.State != readpast.StateBlocked:
			done = "seal-released"
		}
	}
	h.redirectDone(w, r, string(jobURL(id)), done)
}

// jobForm is what the template of an action's form needs: the job, the
// action, the page to go back to and the viewer's form token.
type jobForm struct {
	ID     int64
	Action jobAction
	Next   string
	CSRF   string
}

func newJobForm(id int64, a jobAction, next, csrf string) jobForm {
	return jobForm{ID: id, Action: a, Next: next, CSRF: csrf}
}
