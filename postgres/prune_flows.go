package postgres

import (
	"context"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
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
	var seeds []storekit.FlowSeed
	for rows.Next() {
		var sd storekit.FlowSeed
		if err := rows.Scan(&sd.ID, &sd.Ripe); err != nil {
			rows.Close()
			return 0, 0, opErr("prune flows", err)
		}
		seeds = append(seeds, sd)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, opErr("prune flows", err)
	}
	return storekit.PruneFlowSeeds(seeds, p.Limit, func(id int64) ([]int64, int, error) {
		var ids []int64
		var n int
		if err := s.pool.QueryRow(ctx, pruneFlowSQL, id, readpast.MaxFlowPrune, cut[0], cut[1], cut[2]).Scan(&ids, &n); err != nil {
			return nil, 0, opErr("prune flows", err)
		}
		return ids, n, nil
	})
}

// cutoff is t as a statement parameter: NULL when zero (keep).
func cutoff(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
