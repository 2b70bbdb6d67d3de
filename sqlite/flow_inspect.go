package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/readpast/readpast"
)

var _ readpast.FlowInspector = (*Store)(nil)

// Flow inspection (docs/design/workflows.md, "Outputs and inspection";
// migrations/0014_edge_refs.sql). Lists of ids are bound as one JSON
// array, as everywhere in this store.
const (
	// edgeColumns are the columns scanEdge reads.
	edgeColumns = `parent_id, child_id, parent_ref, child_ref, policy, state`
	// flowRelativesSQL reads the edges of job ?1: to its parents (side
	// 'p', by readpast_edges_child, in parent id order) and to its
	// children (side 'c', by the primary key, in child id order), at most
	// ?2 of each (-1: all). A batch's seal (an edge from a negative id:
	// no job) is no parent.
	flowRelativesSQL = `SELECT * FROM (SELECT 'p', ` + edgeColumns + ` FROM readpast_edges WHERE child_id = ?1 AND parent_id > 0
    ORDER BY parent_id LIMIT ?2)
UNION ALL
SELECT * FROM (SELECT 'c', ` + edgeColumns + ` FROM readpast_edges WHERE parent_id = ?1
    ORDER BY child_id LIMIT ?2)`
	// flowJobsSQL reads the jobs of ?1 (a JSON array of ids), live or
	// finished; an id with no row returns nothing.
	flowJobsSQL = `SELECT ` + liveSelect + ` FROM readpast_jobs WHERE id IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT ` + historySelect + ` FROM readpast_history WHERE id IN (SELECT value FROM json_each(?1))`
	// flowNeighboursSQL reads the jobs one edge away, in either
	// direction, from the jobs of ?1 (a JSON array of ids): one level of
	// FlowGraph's breadth-first walk.
	flowNeighboursSQL = `SELECT e.child_id FROM json_each(?1) f JOIN readpast_edges e ON e.parent_id = f.value
UNION
SELECT e.parent_id FROM json_each(?1) f JOIN readpast_edges e ON e.child_id = f.value AND e.parent_id > 0`
	// flowGraphEdgesSQL reads the edges between the jobs of ?1 (both
	// ends among them), in parent, then child order: each job's edges as
	// a parent by the primary key, the child tested against the list.
	// (The unary + keeps the planner from looking up every pair of the
	// two lists in readpast_edges_child: n² probes for n jobs.)
	flowGraphEdgesSQL = `SELECT ` + edgeColumns + ` FROM readpast_edges
WHERE parent_id IN (SELECT value FROM json_each(?1)) AND +child_id IN (SELECT value FROM json_each(?1))
ORDER BY parent_id, child_id`
	// flowParentResultsSQL reads the parents of the jobs of ?1 (a JSON
	// array of ids) with each one's ref in the child's flow and its
	// stored result if it succeeded (NULL otherwise, or if it stored
	// none).
	flowParentResultsSQL = `SELECT e.child_id, e.parent_id, e.parent_ref, h.result
FROM readpast_edges e
LEFT JOIN readpast_history h ON h.id = e.parent_id AND h.state = 'succeeded'
WHERE e.child_id IN (SELECT value FROM json_each(?1)) AND e.parent_id > 0
ORDER BY e.child_id, e.parent_id`
)

// Relatives returns the jobs job id runs after (parents) and those that
// run after it (children), each in id order with its edge, at most limit
// of each (limit <= 0: all), read in one snapshot
// (readpast.FlowInspector). A relative whose row is gone (a finished job
// pruned or deleted since) has a nil Job. readpast.ErrNotFound if no job
// has that id.
func (s *Store) Relatives(ctx context.Context, id int64, limit int) (parents, children []readpast.Relative, err error) {
	if limit <= 0 {
		limit = -1
	}
	err = s.readSnapshot(ctx, "relatives", func(tx *sql.Tx) error {
		parents, children = nil, nil
		rows, err := tx.QueryContext(ctx, flowRelativesSQL, id, limit)
		if err != nil {
			return err
		}
		var edges []readpast.Edge
		for rows.Next() {
			var side string
			e, err := scanEdge(rows, &side)
			if err != nil {
				rows.Close()
				return err
			}
			edges = append(edges, e) // side: which end id is, as SplitRelatives tells
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		jobs, err := jobsByID(ctx, tx, readpast.RelativeIDs(id, edges))
		if err != nil {
			return err
		}
		if jobs[id] == nil {
			return fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
		}
		parents, children = readpast.SplitRelatives(id, edges, jobs)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return parents, children, nil
}

// FlowGraph returns the jobs connected to job id by edges, in either
// direction, breadth first (id, then the jobs one edge away in id order,
// and so on), at most limit of them (limit <= 0:
// readpast.MaxFlowGraph), and the edges between them, read in one
// snapshot (readpast.FlowInspector): one statement per level of the
// walk. Truncated says the graph holds more. A job whose row is gone
// (pruned or deleted) is left out, with its edges. readpast.ErrNotFound
// if no job has that id.
func (s *Store) FlowGraph(ctx context.Context, id int64, limit int) (readpast.FlowGraph, error) {
	if limit <= 0 || limit > readpast.MaxFlowGraph {
		limit = readpast.MaxFlowGraph
	}
	var g readpast.FlowGraph
	err := s.readSnapshot(ctx, "flow graph", func(tx *sql.Tx) error {
		g = readpast.FlowGraph{}
		ids, truncated, err := walkFlow(ctx, tx, id, limit)
		if err != nil {
			return err
		}
		g.Truncated = truncated
		jobs, err := jobsByID(ctx, tx, ids)
		if err != nil {
			return err
		}
		if jobs[id] == nil {
			return fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
		}
		rows, err := tx.QueryContext(ctx, flowGraphEdgesSQL, idsJSON(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		var edges []readpast.Edge
		for rows.Next() {
			e, err := scanEdge(rows)
			if err != nil {
				return err
			}
			edges = append(edges, e)
		}
		g = readpast.AssembleFlowGraph(ids, jobs, edges, g.Truncated)
		return rows.Err()
	})
	if err != nil {
		return readpast.FlowGraph{}, err
	}
	return g, nil
}

// walkFlow walks the edges from job id breadth first, level by level,
// each level's new jobs in id order, and returns the first limit jobs
// found, and whether there were more.
func walkFlow(ctx context.Context, tx *sql.Tx, id int64, limit int) ([]int64, bool, error) {
	order := []int64{id}
	seen := map[int64]bool{id: true}
	frontier := []int64{id}
	for len(frontier) > 0 {
		rows, err := tx.QueryContext(ctx, flowNeighboursSQL, idsJSON(frontier))
		if err != nil {
			return nil, false, err
		}
		var next []int64
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return nil, false, err
			}
			if !seen[n] {
				seen[n] = true
				next = append(next, n)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, false, err
		}
		slices.Sort(next)
		if len(order)+len(next) > limit {
			return append(order, next[:limit-len(order)]...), true, nil
		}
		order = append(order, next...)
		frontier = next
	}
	return order, false, nil
}

// ParentResults returns, for each of the jobs ids that runs after
// others, its parents' stored results by their refs in its flow (a
// parent named by id, or without a ref, by its id in decimal), as
// readpast.Job.ParentResults gives them: nil for a parent that has not
// succeeded or stored no result. Jobs without parents are left out. One
// statement, whatever the number of jobs: what a claim that asks for
// parent results adds (httpapi).
func (s *Store) ParentResults(ctx context.Context, ids []int64) (map[int64]map[string]json.RawMessage, error) {
	var out map[int64]map[string]json.RawMessage
	err := s.readOp(ctx, "parent results", func(db *sql.DB) error {
		out = map[int64]map[string]json.RawMessage{}
		if len(ids) == 0 {
			return nil
		}
		rows, err := db.QueryContext(ctx, flowParentResultsSQL, idsJSON(ids))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var child, parent int64
			var ref string
			var result sql.NullString
			if err := rows.Scan(&child, &parent, &ref, &result); err != nil {
				return err
			}
			if ref == "" {
				ref = strconv.FormatInt(parent, 10)
			}
			m := out[child]
			if m == nil {
				m = map[string]json.RawMessage{}
				out[child] = m
			}
			m[ref] = nil
			if result.Valid {
				m[ref] = json.RawMessage(result.String)
			}
		}
		return rows.Err()
	})
	return out, err
}

// readSnapshot runs fn in a read-only transaction on the read pool: its
// statements see one snapshot of the database.
func (s *Store) readSnapshot(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.readOp(ctx, op, func(db *sql.DB) error {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return fn(tx)
	})
}

// scanEdge reads the columns of edgeColumns after the columns of dest.
func scanEdge(r rowScanner, dest ...any) (readpast.Edge, error) {
	var e readpast.Edge
	var policy, state string
	if err := r.Scan(append(dest, &e.ParentID, &e.ChildID, &e.ParentRef, &e.ChildRef, &policy, &state)...); err != nil {
		return readpast.Edge{}, err
	}
	e.Policy, e.State = readpast.EdgePolicy(policy), readpast.EdgeState(state)
	return e, nil
}

// jobsByID reads the jobs ids, live or finished, by id (flowJobsSQL);
// an id with no row is missing from the map.
func jobsByID(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]*readpast.Job, error) {
	rows, err := tx.QueryContext(ctx, flowJobsSQL, idsJSON(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]*readpast.Job, len(ids))
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out[j.ID] = j
	}
	return out, rows.Err()
}
