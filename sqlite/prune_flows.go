package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

var _ readpast.FlowPruner = (*Store)(nil)

// The statements of PruneFlows. A flow is the jobs joined by the edges
// one EnqueueFlow call stored (parent_ref set), or a batch: the members'
// edges into a finishing job that has a seal edge (from its id negated).
// An edge to a job stored earlier joins nothing. ?2-?4 are the cutoffs of
// succeeded, failed and cancelled jobs (NULL keeps that state's jobs).
const (
	// flowOfSQL walks the flow of job ?1, up to ?2 jobs.
	flowOfSQL = `WITH RECURSIVE flow(id) AS (
    SELECT ?1
    UNION
    SELECT e.child_id FROM flow CROSS JOIN readpast_edges e ON e.parent_id = flow.id
    WHERE e.parent_ref <> '' OR EXISTS (
        SELECT 1 FROM readpast_edges s WHERE s.parent_id = -e.child_id AND s.child_id = e.child_id)
    UNION
    SELECT e.parent_id FROM flow CROSS JOIN readpast_edges e ON e.child_id = flow.id
    WHERE e.parent_id > 0 AND (e.parent_ref <> '' OR EXISTS (
        SELECT 1 FROM readpast_edges s WHERE s.parent_id = -flow.id AND s.child_id = flow.id))
)
SELECT id FROM flow LIMIT ?2`

	// flowRipeSQL counts, of the jobs in ?1 (a JSON array), those live,
	// those in history, and those in history that may not go: finished
	// after their state's cutoff, within their unique key's period (?5),
	// or with a live child (a held child is blocked, a released one reads
	// its parents' results when it runs).
	flowRipeSQL = `SELECT
    (SELECT count(*) FROM readpast_jobs WHERE id IN (SELECT value FROM json_each(?1))),
    count(*),
    coalesce(sum(CASE WHEN h.finished_at < CASE h.state WHEN 'succeeded' THEN ?2 WHEN 'failed' THEN ?3 WHEN 'cancelled' THEN ?4 END
                       AND (h.unique_until IS NULL OR h.unique_until <= ?5)
                       AND NOT EXISTS (SELECT 1 FROM readpast_edges d JOIN readpast_jobs c ON c.id = d.child_id
                                       WHERE d.parent_id = h.id)
                      THEN 0 ELSE 1 END), 0)
FROM readpast_history h WHERE h.id IN (SELECT value FROM json_each(?1))`

	// pruneFlowSQL deletes the history rows of the jobs in ?1.
	pruneFlowSQL = `DELETE FROM readpast_history WHERE id IN (SELECT value FROM json_each(?1))
RETURNING id, unique_key, tags`
)

// ripeJob is a condition of pruneFlowSeedsSQL: the job whose id is the
// column id is in history, finished before its state's cutoff, past its
// unique key's period. It is only ever given constant column names.
func ripeJob(id string) string {
	return `EXISTS (SELECT 1 FROM readpast_history rh WHERE rh.id = ` + id + `
      AND rh.finished_at < CASE rh.state WHEN 'succeeded' THEN ?2 WHEN 'failed' THEN ?3 WHEN 'cancelled' THEN ?4 END
      AND (rh.unique_until IS NULL OR rh.unique_until <= ?6))`
}

// pruneFlowSeedsSQL is built once, from constant parts.
var (
	// pruneFlowSeedsSQL lists the first ?5 jobs edges name with ids above
	// ?1, and whether each flow is worth walking: the job is ripe
	// (finished before its state's cutoff, its unique key's period over at
	// ?6), and so is every job its flow's edges join it to directly. A
	// batch's member is not walked while its finishing job is live or
	// young (one probe), nor a job next to a live one.
	pruneFlowSeedsSQL = `WITH named AS (
    SELECT id FROM (SELECT DISTINCT parent_id AS id FROM readpast_edges WHERE parent_id > ?1 ORDER BY parent_id LIMIT ?5)
    UNION
    SELECT id FROM (SELECT DISTINCT child_id AS id FROM readpast_edges WHERE child_id > ?1 ORDER BY child_id LIMIT ?5)
)
SELECT n.id, ` + ripeJob("n.id") + `
    AND NOT EXISTS (
        SELECT 1 FROM readpast_edges e
        WHERE e.parent_id = n.id AND (e.parent_ref <> '' OR EXISTS (
            SELECT 1 FROM readpast_edges s WHERE s.parent_id = -e.child_id AND s.child_id = e.child_id))
          AND NOT ` + ripeJob("e.child_id") + `)
    AND NOT EXISTS (
        SELECT 1 FROM readpast_edges e
        WHERE e.child_id = n.id AND e.parent_id > 0 AND (e.parent_ref <> '' OR EXISTS (
            SELECT 1 FROM readpast_edges s WHERE s.parent_id = -n.id AND s.child_id = n.id))
          AND NOT ` + ripeJob("e.parent_id") + `)
FROM named n ORDER BY n.id LIMIT ?5`
)

// PruneFlows deletes the flows of the jobs edges name, ids above p.After,
// that may go: each flow with a ripe job walked, checked and deleted in
// one write transaction, once per call.
func (s *Store) PruneFlows(ctx context.Context, p readpast.FlowPruneParams) (int, int64, error) {
	p, err := p.Normalize()
	if err != nil {
		return 0, 0, err
	}
	cut := [3]any{cutoff(p.Succeeded), cutoff(p.Failed), cutoff(p.Cancelled)}
	var seeds []storekit.FlowSeed
	err = s.readOp(ctx, "prune flows", func(db *sql.DB) error {
		seeds = seeds[:0]
		rows, err := db.QueryContext(ctx, pruneFlowSeedsSQL, p.After, cut[0], cut[1], cut[2], p.Limit, micros(s.now()))
		if err != nil {
			return err
		}
		for rows.Next() {
			var sd storekit.FlowSeed
			if err := rows.Scan(&sd.ID, &sd.Ripe); err != nil {
				rows.Close()
				return err
			}
			seeds = append(seeds, sd)
		}
		return errors.Join(rows.Err(), rows.Close())
	})
	if err != nil {
		return 0, 0, err
	}
	return storekit.PruneFlowSeeds(seeds, p.Limit, func(id int64) ([]int64, int, error) {
		var ids []int64
		var n int
		err := s.writeTx(ctx, "prune flows", func(tx *sql.Tx) error {
			var err error
			ids, n, err = s.pruneFlow(ctx, tx, id, cut)
			return err
		})
		return ids, n, err
	})
}

// pruneFlow walks the flow of job id and deletes it if all of it may go,
// inside tx. It returns the flow's ids and how many jobs it deleted.
func (s *Store) pruneFlow(ctx context.Context, tx *sql.Tx, id int64, cut [3]any) ([]int64, int, error) {
	rows, err := tx.QueryContext(ctx, flowOfSQL, id, readpast.MaxFlowPrune+1)
	if err != nil {
		return nil, 0, err
	}
	var ids []int64
	for rows.Next() {
		var m int64
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return nil, 0, err
		}
		ids = append(ids, m)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, 0, err
	}
	if len(ids) > readpast.MaxFlowPrune {
		return ids, 0, nil // kept: deleted by hand
	}
	js := idsJSON(ids)
	var live, hist, unripe int
	if err := tx.QueryRowContext(ctx, flowRipeSQL, js, cut[0], cut[1], cut[2], micros(s.now())).Scan(&live, &hist, &unripe); err != nil {
		return nil, 0, err
	}
	if live > 0 || hist != len(ids) || unripe > 0 {
		return ids, 0, nil
	}
	rows, err = tx.QueryContext(ctx, pruneFlowSQL, js)
	if err != nil {
		return nil, 0, err
	}
	var gone []deleted
	for rows.Next() {
		var d deleted
		if err := rows.Scan(&d.id, &d.key, &d.tags); err != nil {
			rows.Close()
			return nil, 0, err
		}
		gone = append(gone, d)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, 0, err
	}
	return ids, len(gone), dropWithJobs(ctx, tx, gone)
}

// cutoff is t as a statement parameter, in microseconds: NULL when zero
// (keep).
func cutoff(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return micros(t)
}
