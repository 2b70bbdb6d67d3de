package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"

	"github.com/readpast/readpast"
)

// A job's page lists at most relativesShown parents and as many children
// (it asks the store for one more of each, to know whether there are
// more); the flow page draws at most flowCap jobs, the nearest to the
// job first.
const (
	relativesShown = 50
	flowCap        = 300
)

// relativeView is a parent or child of a job, as its page lists it.
type relativeView struct {
	// ID and Ref are the relative's, from the edge; Job is nil when the
	// job is gone from the database.
	ID   int64
	Ref  string
	URL  template.URL
	Job  *readpast.Job
	Edge readpast.Edge
}

// relativeViews converts relatives for the job page: the parent's end of
// each edge for parents, the child's for children.
func relativeViews(rs []readpast.Relative, parents bool) []relativeView {
	out := make([]relativeView, 0, len(rs))
	for _, r := range rs {
		id, ref := r.Edge.ChildID, r.Edge.ChildRef
		if parents {
			id, ref = r.Edge.ParentID, r.Edge.ParentRef
		}
		out = append(out, relativeView{ID: id, Ref: ref, URL: jobURL(id), Job: r.Job, Edge: r.Edge})
	}
	return out
}

// relativesTable is a table of a job's parents or children on its page.
type relativesTable struct {
	// ID names the table in the page; More says there are more rows
	// than shown.
	ID, Heading string
	Rows        []relativeView
	More        bool
}

func newRelativesTable(id, heading string, rows []relativeView, more bool) relativesTable {
	return relativesTable{ID: id, Heading: heading, Rows: rows, More: more}
}

// flowURL is the address of the flow page of job id.
func flowURL(id int64) template.URL { return jobURL(id) + "/flow" }

// relatives fills d's parents and children of d.Job, and the flow page's
// address when it has any. A store that keeps no flows leaves them empty.
func (h *Handler) relatives(r *http.Request, d *jobData) error {
	if h.flows == nil {
		return nil
	}
	parents, children, err := h.flows.Relatives(r.Context(), d.Job.ID, relativesShown+1)
	if err != nil {
		return fmt.Errorf("relatives of job %d: %w", d.Job.ID, err)
	}
	if len(parents) > relativesShown {
		parents, d.MoreParents = parents[:relativesShown], true
	}
	if len(children) > relativesShown {
		children, d.MoreChildren = children[:relativesShown], true
	}
	d.Parents, d.Children = relativeViews(parents, true), relativeViews(children, false)
	if len(parents)+len(children) > 0 {
		d.FlowURL = flowURL(d.Job.ID)
	}
	return nil
}

// flowData is what the flow page shows.
type flowData struct {
	Job     *readpast.Job
	JobURL  template.URL
	Drawing flowDrawing
	// Jobs and Edges count what is drawn; Truncated says the flow has
	// more jobs than Cap, of which the nearest are drawn.
	Jobs, Edges int64
	Truncated   bool
	Cap         int64
	// States counts the jobs drawn by state, in lifecycle order.
	States []stateCount
}

// stateCount is how many jobs of a flow are in a state.
type stateCount struct {
	State readpast.JobState
	N     int64
}

// flowPage draws the jobs connected to a job by edges, in either
// direction, as an SVG made on the server.
func (h *Handler) flowPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such job.")
		return
	}
	if h.flows == nil {
		h.errorPage(w, r, v, http.StatusNotFound, "This store keeps no flows.")
		return
	}
	g, err := h.flows.FlowGraph(r.Context(), id, flowCap)
	if err != nil {
		h.storeError(w, r, v, err)
		return
	}
	d := flowData{JobURL: jobURL(id), Truncated: g.Truncated, Cap: flowCap}
	for _, j := range g.Jobs {
		if j != nil && j.ID == id {
			d.Job = j
		}
	}
	if d.Job == nil {
		// The job went between the store's reads.
		h.errorPage(w, r, v, http.StatusNotFound, "There is no such job.")
		return
	}
	d.Drawing = layoutFlow(g, id)
	d.Jobs, d.Edges = int64(len(d.Drawing.Nodes)), int64(len(d.Drawing.Lines))
	n := map[readpast.JobState]int64{}
	for _, nd := range d.Drawing.Nodes {
		n[nd.State]++
	}
	for _, s := range readpast.AllStates {
		if n[s] > 0 {
			d.States = append(d.States, stateCount{State: s, N: n[s]})
		}
	}
	h.render(w, r, v, http.StatusOK, "flow", page{Title: fmt.Sprintf("Flow of job %d", id), Nav: "jobs", Data: d})
}
