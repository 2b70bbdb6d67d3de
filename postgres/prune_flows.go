package postgres

import (
	"context"
	"time"

	"github.com/readpast/readpast"
)

var _ readpast.FlowPruner = (*Store)(nil)

var (
	pruneFlowSeedsSQL = mustStatement("prune_flow_seeds")
	pruneFlowSQL      = mustStatement("prune_flow")
)

// PruneFlows deletes the flows of the jobs edges name, ids above p.After,
// that may go (sql/prune_flow.sql): one statement per flow with a ripe
// job, each flow walked once per call.
func (s *Store) PruneFlows(ctx context.Context, p readpast.FlowPruneParams) (int, int64, error) {
	p, err := p.Normalize()
	if err != nil {
		return 0, 0, err
	}
	cut := [3]*time.Time{cutoff(p.Succeeded), cutoff(p.Failed), cutoff(p.Cancelled)}
	rows, err := s.pool.Query(ctx, pruneFlowSeedsSQL, p.After, p.Limit, cut[0], cut[1], cut[2])
	if err != nil {
		return 0, 0, opErr("prune flows", err)
	}
	type seed struct {
		id   int64
		ripe bool
	}
	var seeds []seed
	for rows.Next() {
		var sd seed
		if err := rows.Scan(&sd.id, &sd.ripe); err != nil {
			rows.Close()
			return 0, 0, opErr("prune flows", err)
		}
		seeds = append(seeds, sd)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, opErr("prune flows", err)
	}
	deleted, walked := 0, map[int64]bool{}
	for _, sd := range seeds {
		if !sd.ripe || walked[sd.id] {
			continue
		}
		var ids []int64
		var n int
		if err := s.pool.QueryRow(ctx, pruneFlowSQL, sd.id, readpast.MaxFlowPrune, cut[0], cut[1], cut[2]).Scan(&ids, &n); err != nil {
			return deleted, 0, opErr("prune flows", err)
		}
		deleted += n
		for _, id := range ids {
			walked[id] = true
		}
	}
	if len(seeds) < p.Limit {
		return deleted, 0, nil
	}
	return deleted, seeds[len(seeds)-1].id, nil
}

// cutoff is t as a statement parameter: NULL when zero (keep).
func cutoff(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
