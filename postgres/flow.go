package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

var (
	_ readpast.FlowStore      = (*Store)(nil)
	_ readpast.FlowSQLTxStore = (*Store)(nil)
	_ readpast.FlowResolver   = (*Store)(nil)
)

// resolveChunk is how many edges one transaction of ResolveFlows
// resolves.
const resolveChunk = 1000

// ResolveFlows works off the edges that parents of many children left
// to resolve (docs/design/workflows.md, "Wide flows"), in transactions of
// resolveChunk edges each, until none is left or limit edges are
// resolved, and returns how many it resolved. Resolvers in several
// processes take different parents; one parent's outcomes apply in the
// order they happened.
func (s *Store) ResolveFlows(ctx context.Context, limit int) (int, error) {
	total := 0
	for total < limit {
		n, err := retryDeadlock(ctx, func() (int, error) {
			var n int
			err := s.pool.QueryRow(ctx, resolveFlowsSQL, min(resolveChunk, limit-total)).Scan(&n)
			return n, err
		})
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return total, opErr("resolve flows", err)
		}
		total += n
	}
	if total > 0 {
		s.claimFrom.ahead() // released children are pending at now (claimfrom.go)
		s.hub.Broadcast()
	}
	return total, nil
}

// EnqueueFlow stores a flow's jobs and edges in one transaction
// (docs/design/workflows.md): the jobs with edges blocked, the others
// pending. Jobs enqueued before that the flow names as parents are
// locked first, in id order, and must be live: the call fails whole,
// naming the first that is not (readpast.ErrNotFound,
// readpast.ErrInvalidState). A parent's finisher waits for this
// transaction, then sees the edges; claims skip the parent meanwhile.
func (s *Store) EnqueueFlow(ctx context.Context, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	f, err := newFlowPlan(jobs)
	if err != nil {
		return nil, err
	}
	defer s.claimFrom.ahead() // its jobs' run_at is the transaction's start (claimfrom.go)
	out, err := retryDeadlock(ctx, func() ([]*readpast.Job, error) {
		var out []*readpast.Job
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			out, err = f.store(ctx, pgxSource{tx})
			return err
		})
		return out, err
	})
	if err != nil {
		return nil, flowErr(err)
	}
	s.flowStored(out)
	return out, nil
}

// EnqueueFlowTx is EnqueueFlow inside the caller's transaction: the jobs
// and edges exist if and only if tx commits. Until tx ends it holds the
// rows of the earlier jobs the flow names as parents: their finishers
// wait for it, and claims pass them over.
func (s *Store) EnqueueFlowTx(ctx context.Context, tx pgx.Tx, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: EnqueueFlowTx: nil transaction")
	}
	return s.enqueueFlowIn(ctx, pgxSource{tx}, jobs)
}

// EnqueueFlowSQLTx is EnqueueFlowTx for database/sql users (pgx's stdlib
// driver).
func (s *Store) EnqueueFlowSQLTx(ctx context.Context, tx *sql.Tx, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: EnqueueFlowSQLTx: nil transaction")
	}
	return s.enqueueFlowIn(ctx, sqlSource{tx}, jobs)
}

func (s *Store) enqueueFlowIn(ctx context.Context, src rowSource, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	f, err := newFlowPlan(jobs)
	if err != nil {
		return nil, err
	}
	defer s.claimFrom.ahead() // its jobs' run_at is the transaction's start (claimfrom.go)
	out, err := f.store(ctx, src)
	if err != nil {
		return nil, flowErr(err)
	}
	s.flowStored(out) // if the transaction commits; a spurious alarm costs a claim
	return out, nil
}

// flowErr wraps a failed flow's error, keeping the ones that explain a
// parent as they are.
func flowErr(err error) error {
	if errors.Is(err, readpast.ErrNotFound) || errors.Is(err, readpast.ErrInvalidState) || errors.Is(err, readpast.ErrInvalid) {
		return err
	}
	return opErr("enqueue flow", err)
}

// flowStored wakes this process's claimers and sets alarms for the
// flow's jobs due later, blocked ones too: a job released before its
// run_at gets its release's wake-up too early, and the alarm at its
// run_at finds it (or, while it is still blocked, nothing: a claim).
func (s *Store) flowStored(out []*readpast.Job) {
	s.hub.Broadcast()
	s.dueLater(out, true)
}

// flowPlan is a normalized flow laid out for its statements.
type flowPlan struct {
	flow     []readpast.FlowJob
	refs     map[string]int // a job's position by its ref
	cols     *enqueueCols
	waiting  []int32 // each job's edges
	parents  []bool  // whether a job of the flow runs after it
	existing []int64 // the earlier jobs named as parents, ascending
}

func newFlowPlan(jobs []readpast.FlowJob) (*flowPlan, error) {
	flow, err := readpast.NormalizeFlow(jobs, time.Now())
	if err != nil {
		return nil, err
	}
	n := len(flow)
	f := &flowPlan{flow: flow, refs: make(map[string]int, n), waiting: make([]int32, n), parents: make([]bool, n)}
	params := make([]readpast.EnqueueParams, n)
	for i, fj := range flow {
		params[i] = fj.Job
		if fj.Ref != "" {
			f.refs[fj.Ref] = i
		}
	}
	for i, fj := range flow {
		f.waiting[i] = int32(len(fj.After))
		for _, a := range fj.After {
			if a.Ref != "" {
				f.parents[f.refs[a.Ref]] = true
			} else {
				f.existing = append(f.existing, a.JobID)
			}
		}
	}
	slices.Sort(f.existing)
	f.existing = slices.Compact(f.existing)
	if f.cols, err = newEnqueueCols(params, nil); err != nil {
		return nil, err
	}
	return f, nil
}

// store runs the flow's statements on src, inside its transaction:
// the earlier parents locked, the jobs inserted, the edges inserted with
// the refs of their two ends.
func (f *flowPlan) store(ctx context.Context, src rowSource) ([]*readpast.Job, error) {
	above, err := chainsAbove(ctx, src, f.existing)
	if err != nil {
		return nil, err
	}
	if err := readpast.CheckFlowDepth(f.flow, above); err != nil {
		return nil, err
	}
	// Parent before child: a job's chain is longer than any of its
	// ancestors'.
	slices.SortFunc(f.existing, func(a, b int64) int {
		if c := above[a] - above[b]; c != 0 {
			return c
		}
		return int(a - b)
	})
	if err := lockParents(ctx, src, f.existing); err != nil {
		return nil, err
	}
	c := f.cols
	rows, err := src.query(ctx, enqueueFlowSQL, c.queues, c.kinds, c.payloads, c.prios, c.runAt,
		c.maxAtt, c.groups, c.tags, c.traceparents, c.tracestates, f.waiting, f.parents, c.moreKeys)
	if err != nil {
		return nil, err
	}
	out, err := scanJobs(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	if len(out) != len(f.flow) {
		return nil, fmt.Errorf("stored %d jobs of %d", len(out), len(f.flow))
	}
	var parents, children []int64
	var policies, parentRefs, childRefs []string
	for i, fj := range f.flow {
		for _, a := range fj.After {
			p := a.JobID
			if a.Ref != "" {
				p = out[f.refs[a.Ref]].ID
			}
			parents, children, policies = append(parents, p), append(children, out[i].ID), append(policies, string(a.Policy))
			parentRefs, childRefs = append(parentRefs, a.Ref), append(childRefs, fj.Ref)
		}
	}
	if len(parents) > 0 {
		if err := src.exec(ctx, flowEdgesSQL, parents, children, policies, parentRefs, childRefs); err != nil {
			return nil, err
		}
	}
	c.setTraceContexts(out)
	return out, nil
}

// lockParents locks the jobs ids in the order given (flow_parents.sql)
// and marks them as parents, or explains the first that is not live and
// marks none.
func lockParents(ctx context.Context, src rowSource, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	found, err := queryIDs(ctx, src, flowParentsSQL, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if slices.Contains(found, id) {
			continue
		}
		rows, err := src.query(ctx, flowParentStateSQL, id)
		if err != nil {
			return err
		}
		var state string
		seen := rows.Next()
		if seen {
			err = rows.Scan(&state)
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		switch {
		case err != nil:
			return err
		case !seen:
			return &readpast.ParentError{ID: id}
		}
		return &readpast.ParentError{ID: id, State: readpast.JobState(state)}
	}
	return src.exec(ctx, flowMarkSQL, ids)
}

// chainsAbove returns the length of the longest chain of parents above
// each of ids (flow_depth.sql), up to readpast.MaxFlowDepth. A job's
// parents never change once it is stored, so no lock is needed.
func chainsAbove(ctx context.Context, src rowSource, ids []int64) (map[int64]int, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := src.query(ctx, flowDepthSQL, ids, readpast.MaxFlowDepth)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	above := make(map[int64]int, len(ids))
	for rows.Next() {
		var id int64
		var d int
		if err := rows.Scan(&id, &d); err != nil {
			return nil, err
		}
		above[id] = d
	}
	return above, rows.Err()
}

// queryIDs runs a statement returning one id a row.
func queryIDs(ctx context.Context, src rowSource, q string, args ...any) ([]int64, error) {
	rows, err := src.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
