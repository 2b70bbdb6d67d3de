package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"text/tabwriter"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// showRelatives is how many parents, and how many children, `jobs show`
// lists; it asks for one more of each to know whether there are more.
const showRelatives = 50

// errNoFlows is what a backend that cannot read a job's edges returns: a
// server older than the relatives endpoint, or a store that keeps no
// flows. `jobs show` then shows the job alone, with a warning.
var errNoFlows = errors.New("cannot list the job's parents and children")

// relative is a job at the other end of one of a job's edges, with the
// edge, as GET /v1/jobs/{id}/relatives encodes it; relatives is that
// endpoint's answer.
type (
	relative  = httpapi.RelativeJob
	relatives = httpapi.RelativesResponse
)

// relativesReader is a backend that reads a job's edges: both backends
// are.
type relativesReader interface {
	// relatives returns the parents and the children of job id, at most
	// limit of each.
	relatives(ctx context.Context, id int64, limit int) (relatives, error)
}

func (d *direct) relatives(ctx context.Context, id int64, limit int) (relatives, error) {
	fi, ok := d.store.(readpast.FlowInspector)
	if !ok {
		return relatives{}, fmt.Errorf("%w: the store (%T) keeps no flows", errNoFlows, d.store)
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	parents, children, err := fi.Relatives(ctx, id, limit)
	if err != nil {
		return relatives{}, err
	}
	return relatives{Parents: wireRelatives(parents), Children: wireRelatives(children)}, nil
}

// wireRelatives converts relatives to their wire form.
func wireRelatives(rs []readpast.Relative) []relative {
	out := make([]relative, 0, len(rs))
	for _, r := range rs {
		w := relative{Edge: r.Edge}
		if r.Job != nil {
			j := httpapi.NewJob(r.Job)
			w.Job = &j
		}
		out = append(out, w)
	}
	return out
}

func (c *remote) relatives(ctx context.Context, id int64, limit int) (relatives, error) {
	var out relatives
	path := "/v1/jobs/" + strconv.FormatInt(id, 10) + "/relatives?limit=" + strconv.Itoa(limit)
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	var re *remoteError
	if errors.As(err, &re) && re.status == http.StatusNotFound && !errors.Is(err, readpast.ErrNotFound) {
		// An unknown route, not an unknown job: a server that predates
		// the endpoint.
		return relatives{}, fmt.Errorf("%w: the server at %s does not serve GET /v1/jobs/{id}/relatives (is it older than this command?)", errNoFlows, c.base)
	}
	return out, err
}

// shownJob is what `jobs show --json` prints: the job as the API encodes
// it, and, for a job with edges, its parents and children (at most
// showRelatives of each; MoreParents and MoreChildren say there are more).
type shownJob struct {
	httpapi.Job
	Parents      []relative `json:"parents,omitempty"`
	Children     []relative `json:"children,omitempty"`
	MoreParents  bool       `json:"more_parents,omitempty"`
	MoreChildren bool       `json:"more_children,omitempty"`
}

// withRelatives reads the parents and children of job for `jobs show`.
// A backend that cannot read edges (errNoFlows) gives the job alone and a
// warning on stderr.
func withRelatives(ctx context.Context, b backend, job httpapi.Job, stderr io.Writer) (shownJob, error) {
	out := shownJob{Job: job}
	var rel relatives
	err := fmt.Errorf("%w: backend %T", errNoFlows, b)
	if rr, ok := b.(relativesReader); ok {
		rel, err = rr.relatives(ctx, job.ID, showRelatives+1)
	}
	switch {
	case errors.Is(err, errNoFlows):
		fmt.Fprintf(stderr, "warning: %v\n", err)
		return out, nil
	case err != nil:
		return out, err
	}
	out.Parents, out.MoreParents = cutRelatives(rel.Parents)
	out.Children, out.MoreChildren = cutRelatives(rel.Children)
	return out, nil
}

// cutRelatives keeps the first showRelatives of rs, and says whether
// there were more.
func cutRelatives(rs []relative) ([]relative, bool) {
	if len(rs) > showRelatives {
		return rs[:showRelatives], true
	}
	return rs, false
}

// printShown writes a job as printJob does, then its parents and its
// children, if any, each as a table.
func printShown(w io.Writer, s shownJob) error {
	if err := printJob(w, s.Job); err != nil {
		return err
	}
	if err := printRelatives(w, "parents (it runs after them)", s.Parents, s.MoreParents, true); err != nil {
		return err
	}
	return printRelatives(w, "children (they run after it)", s.Children, s.MoreChildren, false)
}

// printRelatives writes a heading and a table of rs; nothing when rs is
// empty. The ref shown is the relative's: the parent's of an edge for
// parents, the child's for children.
func printRelatives(w io.Writer, heading string, rs []relative, more, parents bool) error {
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s:\n", heading)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREF\tKIND\tQUEUE\tSTATE\tPOLICY\tEDGE")
	for _, r := range rs {
		id, ref := r.Edge.ChildID, r.Edge.ChildRef
		if parents {
			id, ref = r.Edge.ParentID, r.Edge.ParentRef
		}
		kind, queue, state := "-", "-", "(deleted)"
		if r.Job != nil {
			kind, queue, state = r.Job.Kind, r.Job.Queue, string(r.Job.State)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", id, orDash(ref), kind, queue, state, r.Edge.Policy, r.Edge.State)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if more {
		fmt.Fprintf(w, "… and more: only the first %d are listed\n", len(rs))
	}
	return nil
}
