package history

import (
	"github.com/readpast/readpast"
)

// Edge is one edge of a flow: Child runs after Parent.
type Edge struct {
	Parent, Child int64
	Policy        readpast.EdgePolicy
}

// checkFlows counts the two violations of flows (docs/design/workflows.md):
//
//   - An early start: a claim of a child returned before any completion
//     of a parent was invoked that may have been accepted (an accepted
//     one, or one whose outcome is unknown), for every policy but
//     RunAnyway; under RunAnyway, a child claimed while its parent is
//     still live at the end of the run.
//   - A stranded child: one left blocked although none of its parents
//     could still release it: each has ended, and none holds it (ended
//     without succeeding under HoldChild).
func (r *Report) checkFlows(in Input) {
	if len(in.Edges) == 0 {
		return
	}
	// The earliest invocation of a completion of each job that may have
	// been accepted.
	completed := map[int64]int64{}
	var claims []Event
	for _, e := range in.Events {
		switch {
		case e.Op == OpComplete && (e.Out == OutOK || e.Out == OutSent || e.Out == OutError):
			if at, ok := completed[e.ID]; !ok || e.Inv < at {
				completed[e.ID] = e.Inv
			}
		case e.Op == OpClaim:
			claims = append(claims, e)
		}
	}
	parents := map[int64][]Edge{}
	for _, ed := range in.Edges {
		parents[ed.Child] = append(parents[ed.Child], ed)
	}
	early := map[int64]bool{}
	for _, c := range claims {
		for _, ed := range parents[c.ID] {
			if ed.Policy == readpast.RunAnyway {
				if f, ok := in.Final[ed.Parent]; ok && !f.Missing && !f.State.Final() {
					early[c.ID] = true
					r.problem("job %d claimed by %s at %s while its parent %d (run_anyway) is still %s",
						c.ID, c.Proc, stamp(c.Ret), ed.Parent, f.State)
				}
				continue
			}
			if at, ok := completed[ed.Parent]; !ok || at > c.Ret {
				early[c.ID] = true
				r.problem("job %d claimed by %s at %s before any completion of its parent %d",
					c.ID, c.Proc, stamp(c.Ret), ed.Parent)
			}
		}
	}
	r.EarlyStarts += len(early)
	for child, eds := range parents {
		if f, ok := in.Final[child]; !ok || f.State != readpast.StateBlocked {
			continue
		}
		releasable := false
		for _, ed := range eds {
			p, ok := in.Final[ed.Parent]
			if !ok || p.Missing {
				continue
			}
			if !p.State.Final() || (p.State != readpast.StateSucceeded && ed.Policy == readpast.HoldChild) {
				releasable = true
				break
			}
		}
		if !releasable {
			r.Stranded++
			r.problem("job %d is blocked, and none of its parents can release it", child)
		}
	}
}
