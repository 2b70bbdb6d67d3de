package dashboard

import (
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// limitsData is what the limits page shows.
type limitsData struct {
	Limits []readpast.LimitInfo
	Now    time.Time
}

// limitsPage lists every declared limit (a key's or a template's) with
// the keys it governs: running against the concurrency, the tokens the
// rate allows now and the next start.
func (h *Handler) limitsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	ls, err := h.store.ListLimits(r.Context())
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := limitsData{Limits: ls, Now: h.now()}
	h.render(w, r, v, http.StatusOK, "limits", page{Title: "Limits", Nav: "limits", Data: d})
}
