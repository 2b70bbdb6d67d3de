package dashboard

import (
	"fmt"
	"testing"

	"github.com/readpast/readpast"
)

// graphOf builds a flow graph of jobs 1..n with the edges given as
// parent-child pairs.
func graphOf(n int, edges ...[2]int64) readpast.FlowGraph {
	var g readpast.FlowGraph
	for i := 1; i <= n; i++ {
		g.Jobs = append(g.Jobs, &readpast.Job{ID: int64(i), Kind: fmt.Sprintf("k%d", i), Queue: "q", State: readpast.StateBlocked})
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, readpast.Edge{ParentID: e[0], ChildID: e[1], Policy: readpast.CancelChild, State: readpast.EdgeOpen})
	}
	return g
}

// checkDrawing fails unless every arrow of d points down from its
// parent's box to its child's, every box lies inside the drawing, and no
// two boxes overlap.
func checkDrawing(t *testing.T, d flowDrawing) map[int64]flowNode {
	t.Helper()
	at := map[int64]flowNode{}
	for _, n := range d.Nodes {
		if n.X < 0 || n.Y < 0 || n.X+nodeW > d.W || n.Y+nodeH > d.H {
			t.Errorf("box of job %d at (%d,%d) is outside the %dx%d drawing", n.ID, n.X, n.Y, d.W, d.H)
		}
		for _, o := range at {
			if n.X < o.X+nodeW && o.X < n.X+nodeW && n.Y < o.Y+nodeH && o.Y < n.Y+nodeH {
				t.Errorf("boxes of jobs %d and %d overlap", n.ID, o.ID)
			}
		}
		at[n.ID] = n
	}
	for _, l := range d.Lines {
		p, c := at[l.ParentID], at[l.ChildID]
		if p.Layer >= c.Layer || l.Y1 != p.Y+nodeH || l.Y2 >= c.Y || l.Y2 < l.Y1 {
			t.Errorf("edge %d→%d: parent layer %d y %d, child layer %d y %d, line y %d→%d",
				l.ParentID, l.ChildID, p.Layer, p.Y, c.Layer, c.Y, l.Y1, l.Y2)
		}
	}
	return at
}

// TestLayoutFlow: a job's layer is the longest chain of edges above it,
// parents are drawn above their children, a wide layer wraps into rows
// instead of widening the drawing past perRow boxes, edges to jobs not
// drawn are left out, and refs label the boxes.
func TestLayoutFlow(t *testing.T) {
	// 1 → 2 → 3, and 1 → 3 directly: 3 is two layers down, not one.
	g := graphOf(4, [2]int64{1, 2}, [2]int64{2, 3}, [2]int64{1, 3}, [2]int64{4, 3}, [2]int64{1, 99})
	g.Edges[0].ParentRef, g.Edges[0].ChildRef = "extract", "render"
	d := layoutFlow(g, 2)
	at := checkDrawing(t, d)
	if len(d.Nodes) != 4 || len(d.Lines) != 4 || d.Layers != 3 {
		t.Fatalf("%d nodes, %d lines, %d layers; want 4, 4 (the edge to job 99 left out), 3", len(d.Nodes), len(d.Lines), d.Layers)
	}
	for id, want := range map[int64]int{1: 0, 2: 1, 3: 2, 4: 0} {
		if at[id].Layer != want {
			t.Errorf("job %d in layer %d, want %d", id, at[id].Layer, want)
		}
	}
	if at[1].Label != "extract" || at[2].Label != "render" || at[3].Label != "k3" || !at[2].Current || at[1].Current {
		t.Errorf("labels %q %q %q, current %v %v", at[1].Label, at[2].Label, at[3].Label, at[2].Current, at[1].Current)
	}

	// A fan-out of 20 children wraps into rows of perRow.
	var edges [][2]int64
	for c := int64(2); c <= 21; c++ {
		edges = append(edges, [2]int64{1, c})
	}
	d = layoutFlow(graphOf(21, edges...), 1)
	at = checkDrawing(t, d)
	if want := 2*margin + perRow*nodeW + (perRow-1)*nodeGapX; d.W != want {
		t.Errorf("a fan-out of 20 is %d wide, want %d (%d boxes a row)", d.W, want, perRow)
	}
	rows := map[int]int{}
	for c := int64(2); c <= 21; c++ {
		rows[at[c].Y]++
	}
	if len(rows) != 3 {
		t.Errorf("20 children in %d rows, want 3: %v", len(rows), rows)
	}

	// A cycle (which a flow never has) and a self-edge still draw.
	d = layoutFlow(graphOf(3, [2]int64{1, 2}, [2]int64{2, 3}, [2]int64{3, 2}, [2]int64{1, 1}), 1)
	if len(d.Nodes) != 3 || d.H <= 0 {
		t.Errorf("a cycle: %+v", d)
	}

	// One job, no edges.
	d = layoutFlow(graphOf(1), 1)
	if len(d.Nodes) != 1 || len(d.Lines) != 0 || d.W != 2*margin+nodeW {
		t.Errorf("a lone job: %+v", d)
	}
}

// TestLayoutFlowOrder: the barycentre sweeps put children under their own
// parents: two independent chains side by side do not cross.
func TestLayoutFlowOrder(t *testing.T) {
	// 1 → 4 and 2 → 3: without reordering, 3 would sit under 1.
	d := layoutFlow(graphOf(4, [2]int64{1, 4}, [2]int64{2, 3}), 1)
	at := checkDrawing(t, d)
	if (at[1].X < at[2].X) != (at[4].X < at[3].X) {
		t.Errorf("the edges cross: 1 at %d, 2 at %d; 4 at %d, 3 at %d", at[1].X, at[2].X, at[4].X, at[3].X)
	}
}
