package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"

	"github.com/readpast/readpast"
)

// The flow drawing's geometry, in SVG user units (CSS pixels).
const (
	nodeW     = 168 // a job's box
	nodeH     = 44
	nodeGapX  = 20 // between two boxes of a row
	rowGap    = 16 // between two rows of one layer
	layerGap  = 52 // between layers: room for the arrows
	margin    = 16
	perRow    = 8  // boxes in a row: a wider layer wraps into more rows
	labelRune = 22 // runes of a box's label before it is cut
)

// flowNode is one job's box in the drawing.
type flowNode struct {
	ID    int64
	URL   template.URL
	State readpast.JobState
	// Label is the job's ref in its flow, or its kind; Title the whole
	// description, for the tooltip.
	Label, Title string
	X, Y         int
	// Current marks the job the page is about.
	Current bool
	// Layer is its depth: 0 for a job that runs after none drawn.
	Layer int
}

// TextX, LabelY and SubY place the box's two lines of text.
func (n flowNode) TextX() int  { return n.X + 10 }
func (n flowNode) LabelY() int { return n.Y + 18 }
func (n flowNode) SubY() int   { return n.Y + 35 }

// flowLine is one edge in the drawing: an arrow from the bottom of the
// parent's box to the top of the child's.
type flowLine struct {
	readpast.Edge
	X1, Y1, X2, Y2 int
	Title          string
}

// flowDrawing is a flow graph laid out: layers by depth, parents above
// children.
type flowDrawing struct {
	W, H   int
	Nodes  []flowNode
	Lines  []flowLine
	Layers int
}

// layoutFlow lays g out for drawing. A job's layer is the length of the
// longest chain of edges above it among the jobs drawn, so every arrow
// points down. Within a layer, jobs are ordered by the mean position of
// their parents, then of their children (a barycentre sweep each way),
// which keeps most arrows short and uncrossed; a layer of more than
// perRow jobs wraps into rows. Edges naming a job not in g.Jobs are left
// out; current is the job the page is about.
func layoutFlow(g readpast.FlowGraph, current int64) flowDrawing {
	idx := make(map[int64]int, len(g.Jobs))
	var jobs []*readpast.Job
	for _, j := range g.Jobs {
		if _, dup := idx[j.ID]; j == nil || dup {
			continue
		}
		idx[j.ID] = len(jobs)
		jobs = append(jobs, j)
	}
	n := len(jobs)
	refs := make(map[int64]string)
	children := make([][]int, n)
	parents := make([][]int, n)
	var edges []readpast.Edge
	for _, e := range g.Edges {
		p, okp := idx[e.ParentID]
		c, okc := idx[e.ChildID]
		if !okp || !okc || p == c {
			continue
		}
		edges = append(edges, e)
		children[p] = append(children[p], c)
		parents[c] = append(parents[c], p)
		if e.ParentRef != "" {
			refs[e.ParentID] = e.ParentRef
		}
		if e.ChildRef != "" {
			refs[e.ChildID] = e.ChildRef
		}
	}

	layer := longestPathLayers(parents, children)
	nLayers := 0
	for _, l := range layer {
		nLayers = max(nLayers, l+1)
	}
	byLayer := make([][]int, nLayers)
	for i, l := range layer {
		byLayer[l] = append(byLayer[l], i) // in g.Jobs order: nearest first
	}
	for _, ids := range byLayer {
		slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(jobs[a].ID, jobs[b].ID) })
	}

	widest := 1
	for _, ids := range byLayer {
		widest = max(widest, min(len(ids), perRow))
	}
	width := 2*margin + widest*nodeW + (widest-1)*nodeGapX
	x := make([]int, n)
	place := func(ids []int) {
		for k, i := range ids {
			row, col := k/perRow, k%perRow
			inRow := min(perRow, len(ids)-row*perRow)
			rowW := inRow*nodeW + (inRow-1)*nodeGapX
			x[i] = (width-rowW)/2 + col*(nodeW+nodeGapX)
		}
	}
	for _, ids := range byLayer {
		place(ids)
	}
	// Barycentre sweeps: down by parents, then up by children.
	reorder := func(ids []int, by [][]int) {
		key := make(map[int]float64, len(ids))
		for k, i := range ids {
			key[i] = float64(k) * 1e-9 // no neighbour drawn: keep its place
			if len(by[i]) > 0 {
				sum := 0
				for _, o := range by[i] {
					sum += x[o]
				}
				key[i] = float64(sum) / float64(len(by[i]))
			}
		}
		slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(key[a], key[b]) })
		place(ids)
	}
	for l := 1; l < nLayers; l++ {
		reorder(byLayer[l], parents)
	}
	for l := nLayers - 2; l >= 0; l-- {
		reorder(byLayer[l], children)
	}

	d := flowDrawing{W: width, Layers: nLayers, Nodes: make([]flowNode, n)}
	top := margin
	for l, ids := range byLayer {
		rows := (len(ids) + perRow - 1) / perRow
		for k, i := range ids {
			j := jobs[i]
			label := cmp.Or(refs[j.ID], j.Kind)
			d.Nodes[i] = flowNode{
				ID: j.ID, URL: jobURL(j.ID), State: j.State, Current: j.ID == current, Layer: l,
				Label: short(label, labelRune),
				Title: nodeTitle(j, refs[j.ID]),
				X:     x[i], Y: top + (k/perRow)*(nodeH+rowGap),
			}
		}
		top += rows*nodeH + (rows-1)*rowGap + layerGap
	}
	d.H = top - layerGap + margin
	for _, e := range edges {
		p, c := d.Nodes[idx[e.ParentID]], d.Nodes[idx[e.ChildID]]
		d.Lines = append(d.Lines, flowLine{
			Edge: e,
			X1:   p.X + nodeW/2, Y1: p.Y + nodeH,
			X2: c.X + nodeW/2, Y2: c.Y - 2, // the arrowhead's tip touches the box
			Title: fmt.Sprintf("job %d → job %d: %s, %s", e.ParentID, e.ChildID, e.Policy, e.State),
		})
	}
	// Draw in layer order, so that the page reads top to bottom.
	slices.SortStableFunc(d.Nodes, func(a, b flowNode) int {
		return cmp.Or(cmp.Compare(a.Layer, b.Layer), cmp.Compare(a.Y, b.Y), cmp.Compare(a.X, b.X))
	})
	return d
}

// longestPathLayers gives each node the length of the longest chain of
// edges above it (Kahn's order). Nodes on a cycle, which flows never
// have, go below the rest.
func longestPathLayers(parents, children [][]int) []int {
	n := len(parents)
	layer := make([]int, n)
	indeg := make([]int, n)
	var queue []int
	for i := range n {
		indeg[i] = len(parents[i])
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	seen, deepest := 0, 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		seen++
		deepest = max(deepest, layer[i])
		for _, c := range children[i] {
			layer[c] = max(layer[c], layer[i]+1)
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if seen < n {
		for i := range n {
			if indeg[i] > 0 {
				layer[i] = deepest + 1
			}
		}
	}
	return layer
}

// nodeTitle describes a job in one line, for its box's tooltip.
func nodeTitle(j *readpast.Job, ref string) string {
	s := fmt.Sprintf("Job %d", j.ID)
	if ref != "" {
		s += " (" + ref + ")"
	}
	return fmt.Sprintf("%s: %s in %s, %s", s, j.Kind, j.Queue, j.State)
}
