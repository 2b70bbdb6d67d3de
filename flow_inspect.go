package readpast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// EdgeState is where an edge of a flow stands.
type EdgeState string

// The edge states.
const (
	// EdgeOpen: the parent has not ended yet.
	EdgeOpen EdgeState = "open"
	// EdgeHeld: the parent ended without succeeding and the edge's policy
	// is HoldChild: the child waits for the parent's retry.
	EdgeHeld EdgeState = "held"
	// EdgeDone: resolved (released or cancelled the child, as the policy
	// said).
	EdgeDone EdgeState = "done"
)

// Edge is one stored edge of a flow: ChildID runs after ParentID.
// ParentRef and ChildRef are the refs the two jobs had in the flow that
// stored the edge (empty where that job had none, or was named by id).
type Edge struct {
	ParentID  int64      `json:"parent_id"`
	ChildID   int64      `json:"child_id"`
	ParentRef string     `json:"parent_ref,omitempty"`
	ChildRef  string     `json:"child_ref,omitempty"`
	Policy    EdgePolicy `json:"policy"`
	State     EdgeState  `json:"state"`
}

// Relative is a job at the other end of one of a job's edges, with the
// edge.
type Relative struct {
	Edge Edge `json:"edge"`
	Job  *Job `json:"job"`
}

// FlowGraph is the jobs connected to one job by edges, in either
// direction, and the edges between them. Truncated is set when the graph
// holds more jobs than were asked for: Jobs then holds the first found,
// nearest first, and Edges only those between them.
type FlowGraph struct {
	Jobs      []*Job `json:"jobs"`
	Edges     []Edge `json:"edges"`
	Truncated bool   `json:"truncated"`
}

// FlowInspector is implemented by stores that keep flows (both stores):
// it reads a job's edges, for ParentResults, `readpast jobs show` and the
// dashboard's flow page.
type FlowInspector interface {
	// Relatives returns the jobs that job id runs after (parents) and
	// the jobs that run after it (children), each in id order, at most
	// limit of each (limit <= 0: all); ErrNotFound if no job has that id.
	Relatives(ctx context.Context, id int64, limit int) (parents, children []Relative, err error)
	// FlowGraph returns the jobs connected to job id by edges, id first,
	// at most limit of them (limit <= 0: MaxFlowGraph); ErrNotFound if no
	// job has that id.
	FlowGraph(ctx context.Context, id int64, limit int) (FlowGraph, error)
	// ParentResults returns, for each of the jobs ids that runs after
	// others, its parents' results as Job.ParentResults gives them; jobs
	// without parents are left out. One statement, whatever the number of
	// jobs (a claim over HTTP that asks for them reads them so).
	ParentResults(ctx context.Context, ids []int64) (map[int64]map[string]json.RawMessage, error)
}

// RelativeIDs is job id and the jobs at the other ends of its edges
// (each with id at one end), for a store to read (FlowInspector).
func RelativeIDs(id int64, edges []Edge) []int64 {
	ids := make([]int64, 0, len(edges)+1)
	ids = append(ids, id)
	for _, e := range edges {
		if e.ChildID == id {
			ids = append(ids, e.ParentID)
		} else {
			ids = append(ids, e.ChildID)
		}
	}
	return ids
}

// SplitRelatives sorts the edges of job id (each with id at one end) into
// its parents and its children, in the order given, each with the job at
// its other end from jobs (nil when that job's row is gone), for a store
// (FlowInspector).
func SplitRelatives(id int64, edges []Edge, jobs map[int64]*Job) (parents, children []Relative) {
	for _, e := range edges {
		if e.ChildID == id {
			parents = append(parents, Relative{Edge: e, Job: jobs[e.ParentID]})
		} else {
			children = append(children, Relative{Edge: e, Job: jobs[e.ChildID]})
		}
	}
	return parents, children
}

// AssembleFlowGraph is the FlowGraph of the jobs ids (in that order)
// whose rows jobs holds, and the edges between those, for a store
// (FlowInspector): a job whose row is gone is left out, with its edges.
func AssembleFlowGraph(ids []int64, jobs map[int64]*Job, edges []Edge, truncated bool) FlowGraph {
	g := FlowGraph{Jobs: make([]*Job, 0, len(jobs)), Edges: []Edge{}, Truncated: truncated}
	for _, id := range ids {
		if j := jobs[id]; j != nil {
			g.Jobs = append(g.Jobs, j)
		}
	}
	for _, e := range edges {
		if jobs[e.ParentID] != nil && jobs[e.ChildID] != nil {
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// MaxFlowGraph caps the jobs of one FlowGraph.
const MaxFlowGraph = 2000

// ErrNoRelatives is returned by Job.Parents and Job.ParentResults for a
// job that was not handed to a handler by a Client (read from a store,
// say): ask Client.Relatives instead.
var ErrNoRelatives = errors.New("readpast: this job was not handed out by a client: use Client.Relatives")

// Relatives is FlowInspector.Relatives on the client's store.
func (c *Client) Relatives(ctx context.Context, id int64, limit int) (parents, children []Relative, err error) {
	fi, ok := c.store.(FlowInspector)
	if !ok {
		return nil, nil, fmt.Errorf("readpast: Relatives: store %T keeps no flows", c.store)
	}
	return fi.Relatives(ctx, id, limit)
}

// FlowGraph is FlowInspector.FlowGraph on the client's store.
func (c *Client) FlowGraph(ctx context.Context, id int64, limit int) (FlowGraph, error) {
	fi, ok := c.store.(FlowInspector)
	if !ok {
		return FlowGraph{}, fmt.Errorf("readpast: FlowGraph: store %T keeps no flows", c.store)
	}
	return fi.FlowGraph(ctx, id, limit)
}

// Parents returns the jobs j runs after, with their edges and their
// stored results, for a job a Client handed to a handler; ErrNoRelatives
// otherwise.
func (j *Job) Parents(ctx context.Context) ([]Relative, error) {
	if j.flows == nil {
		return nil, ErrNoRelatives
	}
	parents, _, err := j.flows.Relatives(ctx, j.ID, 0)
	return parents, err
}

// ParentResults returns the stored results of the jobs j runs after, by
// their refs in j's flow (a parent named by job id, or without a ref, by
// its id in decimal), for a job a Client handed to a handler
// (ErrNoRelatives otherwise). A parent that has not succeeded (a
// RunAnyway edge releases j whatever the parent's outcome) or stored no
// result maps to nil. A job without parents gets an empty map.
func (j *Job) ParentResults(ctx context.Context) (map[string]json.RawMessage, error) {
	if j.flows == nil {
		return nil, ErrNoRelatives
	}
	all, err := j.flows.ParentResults(ctx, []int64{j.ID})
	if err != nil {
		return nil, err
	}
	if out := all[j.ID]; out != nil {
		return out, nil
	}
	return map[string]json.RawMessage{}, nil
}
