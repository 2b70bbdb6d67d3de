package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/readpast/readpast"
)

// Limits of the flow inspection endpoints' limit parameter.
const (
	// DefaultRelativesLimit is how many parents, and how many children,
	// GET /v1/jobs/{id}/relatives lists when its limit is left out.
	DefaultRelativesLimit = 100
	// MaxRelativesLimit is the largest limit GET /v1/jobs/{id}/relatives
	// takes.
	MaxRelativesLimit = 1000
)

// RelativeJob is one relative of a job on the wire: the edge between
// them and the job at its other end (null when that job's row is gone:
// a finished job pruned or deleted since).
type RelativeJob struct {
	Edge readpast.Edge `json:"edge"`
	Job  *Job          `json:"job"`
}

// RelativesResponse is the answer to GET /v1/jobs/{id}/relatives: the
// jobs the job runs after and those that run after it, each in id order.
type RelativesResponse struct {
	Parents  []RelativeJob `json:"parents"`
	Children []RelativeJob `json:"children"`
}

// FlowGraphResponse is the answer to GET /v1/jobs/{id}/flow
// (readpast.FlowGraph): the jobs connected to the job by edges, breadth
// first from it, and the edges between them. Truncated says the graph
// holds more jobs than the response does.
type FlowGraphResponse struct {
	Jobs      []Job           `json:"jobs"`
	Edges     []readpast.Edge `json:"edges"`
	Truncated bool            `json:"truncated"`
}

// flowInspector is the store's readpast.FlowInspector, or a 500 naming
// the store that keeps no flows.
func (s *server) flowInspector() (readpast.FlowInspector, *apiError) {
	fi, ok := s.store.(readpast.FlowInspector)
	if !ok {
		return nil, &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
			Message: "this server's store keeps no dependencies between jobs", cause: fmt.Errorf("store %T is not a readpast.FlowInspector", s.store)}
	}
	return fi, nil
}

// decodeLimitQuery decodes a query that takes only limit: between 1 and
// most, def when left out.
func decodeLimitQuery(rawQuery string, def, most int) (int, *apiError) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: "malformed query string"}
	}
	for k, vs := range q {
		switch {
		case k != "limit":
			return 0, fieldError(k, "unknown query parameter")
		case len(vs) > 1:
			return 0, fieldError(k, "given more than once")
		}
	}
	vs, ok := q["limit"]
	if !ok {
		return def, nil
	}
	n, ok := ParseID(vs[0])
	if !ok || n > int64(most) {
		return 0, fieldError("limit", "must be between 1 and %d", most)
	}
	return int(n), nil
}

// relatives serves GET /v1/jobs/{id}/relatives: the job's parents and
// children with their edges, at most limit of each, within the response
// budget (the later ones of each side are left out past it).
func (s *server) relatives(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	limit, ae := decodeLimitQuery(r.URL.RawQuery, DefaultRelativesLimit, MaxRelativesLimit)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	fi, ae := s.flowInspector()
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	parents, children, err := fi.Relatives(r.Context(), id, limit)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	left := s.maxResp
	wire := func(rs []readpast.Relative) []RelativeJob {
		out := make([]RelativeJob, 0, len(rs))
		for _, rel := range rs {
			rj := RelativeJob{Edge: rel.Edge}
			if rel.Job != nil {
				j := NewJob(rel.Job)
				rj.Job = &j
			}
			if left -= relativeBytes(rel); left < 0 && len(out) > 0 {
				break
			}
			out = append(out, rj)
		}
		return out
	}
	s.writeJSON(w, r, http.StatusOK, RelativesResponse{Parents: wire(parents), Children: wire(children)})
}

// relativeBytes estimates the encoded size of a relative: its job's (as
// the pager counts it) and its edge's.
func relativeBytes(rel readpast.Relative) int {
	n := 200 + len(rel.Edge.ParentRef) + len(rel.Edge.ChildRef)
	if rel.Job != nil {
		n += jobBytes(rel.Job)
	}
	return n
}

// flowGraph serves GET /v1/jobs/{id}/flow: the jobs connected to the
// job, at most limit, breadth first from it, and the edges between them.
// Jobs past the response budget are left out as those past the limit
// are: truncated, with their edges.
func (s *server) flowGraph(w http.ResponseWriter, r *http.Request) {
	id, ae := pathID(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	limit, ae := decodeLimitQuery(r.URL.RawQuery, readpast.MaxFlowGraph, readpast.MaxFlowGraph)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	fi, ae := s.flowInspector()
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	g, err := fi.FlowGraph(r.Context(), id, limit)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	resp := FlowGraphResponse{Jobs: make([]Job, 0, len(g.Jobs)), Edges: []readpast.Edge{}, Truncated: g.Truncated}
	kept := make(map[int64]bool, len(g.Jobs))
	left := s.maxResp
	for _, j := range g.Jobs {
		if left -= jobBytes(j) + 100; left < 0 && len(resp.Jobs) > 0 {
			resp.Truncated = true
			break
		}
		resp.Jobs = append(resp.Jobs, NewJob(j))
		kept[j.ID] = true
	}
	for _, e := range g.Edges {
		if kept[e.ParentID] && kept[e.ChildID] {
			resp.Edges = append(resp.Edges, e)
		}
	}
	s.writeJSON(w, r, http.StatusOK, resp)
}

// parentResultsOf reads the parents' results of the claimed jobs that
// run after others, in one statement (readpast.FlowInspector); nothing
// on a store that keeps no flows.
func (s *server) parentResultsOf(r *http.Request, jobs []*readpast.Job) (map[int64]map[string]json.RawMessage, error) {
	fi, ok := s.store.(readpast.FlowInspector)
	if !ok {
		return nil, nil
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return fi.ParentResults(ctx, ids)
}
