package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

var _ readpast.FlowInspector = (*Store)(nil)

// The statements of flow inspection (docs/design/workflows.md, "Outputs
// and inspection").
var (
	flowRelativesSQL     = mustStatement("flow_relatives")
	flowJobsSQL          = mustStatement("flow_jobs")
	flowGraphSQL         = mustStatement("flow_graph")
	flowGraphEdgesSQL    = mustStatement("flow_graph_edges")
	flowParentResultsSQL = mustStatement("flow_parent_results")
)

// readOnly is the transaction of an inspection: its statements read one
// snapshot, so a job that finishes meanwhile is seen live or finished,
// with its edges as they were then.
var readOnly = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// Relatives returns the jobs job id runs after (parents) and those that
// run after it (children), each in id order with its edge, at most limit
// of each (limit <= 0: all), read in one snapshot
// (readpast.FlowInspector). A relative whose row is gone (a finished job
// pruned or deleted since) has a nil Job. readpast.ErrNotFound if no job
// has that id.
func (s *Store) Relatives(ctx context.Context, id int64, limit int) (parents, children []readpast.Relative, err error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	err = pgx.BeginTxFunc(ctx, s.pool, readOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, flowRelativesSQL, id, lim)
		if err != nil {
			return err
		}
		var edges []readpast.Edge
		for rows.Next() {
			var side string
			e, err := scanEdgeAfter(rows, &side)
			if err != nil {
				rows.Close()
				return err
			}
			edges = append(edges, e) // side: which end id is, as SplitRelatives tells
		}
		rows.Close()
		if err := rows.Err(); err != nil {
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
		return nil, nil, inspectErr("relatives", err)
	}
	return parents, children, nil
}

// FlowGraph returns the jobs connected to job id by edges, in either
// direction, breadth first (id, then the jobs one edge away in id order,
// and so on), at most limit of them (limit <= 0:
// readpast.MaxFlowGraph), and the edges between them, read in one
// snapshot (readpast.FlowInspector). Truncated says the graph holds more.
// A job whose row is gone (pruned or deleted) is left out, with its
// edges. readpast.ErrNotFound if no job has that id.
func (s *Store) FlowGraph(ctx context.Context, id int64, limit int) (readpast.FlowGraph, error) {
	if limit <= 0 || limit > readpast.MaxFlowGraph {
		limit = readpast.MaxFlowGraph
	}
	var g readpast.FlowGraph
	err := pgx.BeginTxFunc(ctx, s.pool, readOnly, func(tx pgx.Tx) error {
		var ids []int64
		if err := tx.QueryRow(ctx, flowGraphSQL, id, limit).Scan(&ids); err != nil {
			return err
		}
		if len(ids) > limit {
			ids, g.Truncated = ids[:limit], true
		}
		jobs, err := jobsByID(ctx, tx, ids)
		if err != nil {
			return err
		}
		if jobs[id] == nil {
			return fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
		}
		rows, err := tx.Query(ctx, flowGraphEdgesSQL, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		var edges []readpast.Edge
		for rows.Next() {
			e, err := scanEdgeAfter(rows)
			if err != nil {
				return err
			}
			edges = append(edges, e)
		}
		g = readpast.AssembleFlowGraph(ids, jobs, edges, g.Truncated)
		return rows.Err()
	})
	if err != nil {
		return readpast.FlowGraph{}, inspectErr("flow graph", err)
	}
	return g, nil
}

// ParentResults returns, for each of the jobs ids that runs after
// others, its parents' stored results by their refs in its flow (a
// parent named by id, or without a ref, by its id in decimal), as
// readpast.Job.ParentResults gives them: nil for a parent that has not
// succeeded or stored no result. Jobs without parents are left out. One
// statement, whatever the number of jobs: what a claim that asks for
// parent results adds (httpapi).
func (s *Store) ParentResults(ctx context.Context, ids []int64) (map[int64]map[string]json.RawMessage, error) {
	out := map[int64]map[string]json.RawMessage{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, flowParentResultsSQL, ids)
	if err != nil {
		return nil, opErr("parent results", err)
	}
	defer rows.Close()
	for rows.Next() {
		var child, parent int64
		var ref string
		var result []byte
		if err := rows.Scan(&child, &parent, &ref, &result); err != nil {
			return nil, opErr("parent results", err)
		}
		if ref == "" {
			ref = strconv.FormatInt(parent, 10)
		}
		m := out[child]
		if m == nil {
			m = map[string]json.RawMessage{}
			out[child] = m
		}
		if result != nil {
			m[ref] = json.RawMessage(result)
		} else {
			m[ref] = nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("parent results", err)
	}
	return out, nil
}

// scanEdgeAfter reads the edge columns (parent_id, child_id, parent_ref,
// child_ref, policy, state) after the columns of dest.
func scanEdgeAfter(r scanner, dest ...any) (readpast.Edge, error) {
	var e readpast.Edge
	var policy, state string
	if err := r.Scan(append(dest, &e.ParentID, &e.ChildID, &e.ParentRef, &e.ChildRef, &policy, &state)...); err != nil {
		return readpast.Edge{}, err
	}
	e.Policy, e.State = readpast.EdgePolicy(policy), readpast.EdgeState(state)
	return e, nil
}

// jobsByID reads the jobs ids, live or finished, by id (flow_jobs.sql);
// an id with no row is missing from the map.
func jobsByID(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*readpast.Job, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	rows, err := tx.Query(ctx, flowJobsSQL, slices.Compact(ids))
	if err != nil {
		return nil, err
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]*readpast.Job, len(jobs))
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

// inspectErr wraps an error of an inspection, keeping ErrNotFound as it
// is.
func inspectErr(op string, err error) error {
	if errors.Is(err, readpast.ErrNotFound) {
		return err
	}
	return opErr(op, err)
}
