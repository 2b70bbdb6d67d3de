package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/readpast/readpast"
)

var _ readpast.FlowStore = (*Store)(nil)

// Flows (docs/design/workflows.md; migrations/0013_flows.sql).
const (
	// flowParentSQL reads the state of job ?1, named as a parent by id,
	// in either table.
	flowParentSQL = `SELECT state, 1 FROM readpast_jobs WHERE id = ?1
UNION ALL
SELECT state, 0 FROM readpast_history WHERE id = ?1`
	// markParentsSQL marks the live jobs of ?1 (a JSON array of ids) as
	// parents, so that their final transitions resolve their edges.
	markParentsSQL = `UPDATE readpast_jobs SET has_children = 1
WHERE id IN (SELECT value FROM json_each(?1)) AND NOT has_children`
	// insertEdgesSQL inserts the edges of ?1, a JSON array of
	// [parent_id, child_id, policy, parent_ref, child_ref], all open (a
	// ref is "" where the job had none, or was named by id).
	insertEdgesSQL = `INSERT INTO readpast_edges (parent_id, child_id, policy, state, parent_ref, child_ref)
SELECT value ->> 0, value ->> 1, value ->> 2, 'open', value ->> 3, value ->> 4 FROM json_each(?1)`
	// flowDepthSQL reads the length of the longest chain of parents above
	// each job of ?1 (a JSON array of ids), through edges in any state,
	// counted up to ?2; a row repeated on two paths is read once per
	// depth. A batch's seal (an edge from a negative id) adds no level.
	flowDepthSQL = `WITH RECURSIVE up(job, node, d) AS (
    SELECT value, value, 0 FROM json_each(?1)
    UNION
    SELECT u.job, e.parent_id, u.d + 1 FROM up u JOIN readpast_edges e ON e.child_id = u.node AND e.parent_id > 0
    WHERE u.d < ?2)
SELECT job, max(d) FROM up GROUP BY job`
)

// flowState is the state a job of a flow is stored in.
func flowState(f flowRow) readpast.JobState {
	if f.waitingOn > 0 {
		return readpast.StateBlocked
	}
	return readpast.StatePending
}

// EnqueueFlow inserts the jobs of a flow and the edges between them in one
// write transaction (all or none) and returns the jobs in order, with
// increasing ids: a job with edges is blocked, waiting for its parents,
// the others pending (readpast.FlowStore). The flow is checked with
// readpast.NormalizeFlow first. A parent named by id must be live
// (pending, running or blocked): a finished one fails the whole call with
// readpast.ErrInvalidState, an unknown one with readpast.ErrNotFound,
// naming the job; a flow whose chains, under the chains above the parents
// it names by id, would run deeper than readpast.MaxFlowDepth fails with
// the *readpast.FieldError of readpast.CheckFlowDepth. Nothing is stored
// then.
func (s *Store) EnqueueFlow(ctx context.Context, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	now := s.now()
	plan, err := newFlowPlan(jobs, now)
	if err != nil {
		return nil, err
	}
	var out []*readpast.Job
	err = s.writeTx(ctx, "enqueue flow", func(tx *sql.Tx) error {
		var err error
		out, err = plan.storeIn(ctx, tx, now)
		return err
	})
	if err != nil {
		return nil, fieldErr(err)
	}
	s.flowStored(out)
	return out, nil
}

var _ readpast.FlowSQLTxStore = (*Store)(nil)

// EnqueueFlowSQLTx is EnqueueFlow inside the caller's transaction tx,
// which must be a transaction on s.DB(): the jobs and edges exist if and
// only if tx commits (readpast.FlowSQLTxStore). The parents it names by
// id are checked inside tx, whose write lock holds every other writer
// back until tx ends, so none of them can finish unseen.
//
// As with EnqueueSQLTx, subscribers are woken once tx has ended, and there
// is no retry on SQLITE_BUSY: the caller owns the transaction. After an
// error other than a *readpast.FieldError from readpast.NormalizeFlow,
// roll tx back.
func (s *Store) EnqueueFlowSQLTx(ctx context.Context, tx *sql.Tx, jobs []readpast.FlowJob) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("sqlite: EnqueueFlowSQLTx: nil transaction")
	}
	now := s.now()
	plan, err := newFlowPlan(jobs, now)
	if err != nil {
		return nil, err
	}
	out, err := plan.storeIn(ctx, tx, now)
	if err != nil {
		if fe := fieldErr(err); fe != err {
			return nil, fe
		}
		return nil, fmt.Errorf("sqlite: enqueue flow: %w", classify(err))
	}
	s.storedInTx(out)
	return out, nil
}

// fieldErr is the *readpast.FieldError err holds, if any (a flow too
// deep), else err.
func fieldErr(err error) error {
	var fe *readpast.FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return err
}

// flowStored wakes the claimers and sets the alarms of a stored flow's
// jobs. A blocked job released before its run_at is due then: its alarm
// is set now (a job still blocked then costs a probe).
func (s *Store) flowStored(out []*readpast.Job) {
	s.wake()
	s.dueLater(out)
}

// flowPlan is a normalized flow laid out for its statements.
type flowPlan struct {
	flow     []readpast.FlowJob
	params   []readpast.EnqueueParams // each job's, run_at filled in
	rows     []flowRow
	refs     map[string]int // a job's position by its ref
	existing []int64        // parents named by id, in order of first mention
}

// newFlowPlan normalizes jobs (readpast.NormalizeFlow) at now.
func newFlowPlan(jobs []readpast.FlowJob, now time.Time) (*flowPlan, error) {
	flow, err := readpast.NormalizeFlow(jobs, now)
	if err != nil {
		return nil, err
	}
	p := &flowPlan{
		flow:   flow,
		params: make([]readpast.EnqueueParams, len(flow)),
		rows:   make([]flowRow, len(flow)),
		refs:   make(map[string]int, len(flow)),
	}
	for i, fj := range flow {
		params := fj.Job
		if params.RunAt.IsZero() {
			params.RunAt = now
		}
		params.Payload = slices.Clone(params.Payload)
		p.params[i] = params
		p.rows[i].waitingOn = len(fj.After)
		if fj.Ref != "" {
			p.refs[fj.Ref] = i
		}
		for _, a := range fj.After {
			if a.JobID != 0 && !slices.Contains(p.existing, a.JobID) {
				p.existing = append(p.existing, a.JobID)
			}
		}
	}
	for _, fj := range flow {
		for _, a := range fj.After {
			if a.Ref != "" {
				p.rows[p.refs[a.Ref]].hasChildren = true
			}
		}
	}
	return p, nil
}

// storeIn checks the parents named by id (live, not too deep) and inserts
// the flow's jobs and edges, with the refs of their two ends, inside tx.
func (p *flowPlan) storeIn(ctx context.Context, tx *sql.Tx, now time.Time) ([]*readpast.Job, error) {
	if err := checkParents(ctx, tx, p.existing); err != nil {
		return nil, err
	}
	if err := checkDepth(ctx, tx, p.flow, p.existing); err != nil {
		return nil, err
	}
	// Marked only once the flow will be stored: a refused flow marks no
	// parent, even in a caller's transaction that commits after the
	// refusal.
	if len(p.existing) > 0 {
		if _, err := tx.ExecContext(ctx, markParentsSQL, idsJSON(p.existing)); err != nil {
			return nil, err
		}
	}
	out, err := insertRows(ctx, tx, p.params, p.rows, now)
	if err != nil {
		return nil, err
	}
	var edges [][5]any
	for i, fj := range p.flow {
		for _, a := range fj.After {
			parent := a.JobID
			if a.Ref != "" {
				parent = out[p.refs[a.Ref]].ID
			}
			edges = append(edges, [5]any{parent, out[i].ID, string(a.Policy), a.Ref, fj.Ref})
		}
	}
	if len(edges) == 0 {
		return out, nil
	}
	js, err := json.Marshal(edges)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, insertEdgesSQL, string(js)); err != nil {
		return nil, err
	}
	return out, nil
}

// checkDepth refuses, inside tx, a flow whose chains under the chains
// above the parents ids it names by id would pass readpast.MaxFlowDepth
// (readpast.CheckFlowDepth). tx holds the write lock: no chain above them
// grows meanwhile.
func checkDepth(ctx context.Context, tx *sql.Tx, flow []readpast.FlowJob, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, flowDepthSQL, idsJSON(ids), readpast.MaxFlowDepth)
	if err != nil {
		return err
	}
	defer rows.Close()
	above := make(map[int64]int, len(ids))
	for rows.Next() {
		var id int64
		var d int
		if err := rows.Scan(&id, &d); err != nil {
			return err
		}
		above[id] = d
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return readpast.CheckFlowDepth(flow, above)
}

// checkParents checks inside tx that the jobs ids, named as parents by
// id, are live (storeIn marks them as parents once the flow passes every
// check). SQLite's single writer holds every other write back until tx
// ends, so none of them can finish before the edges to it are stored.
func checkParents(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	for _, id := range ids {
		var (
			state string
			live  bool
		)
		err := tx.QueryRowContext(ctx, flowParentSQL, id).Scan(&state, &live)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return &readpast.ParentError{ID: id}
		case err != nil:
			return err
		case !live:
			return &readpast.ParentError{ID: id, State: readpast.JobState(state)}
		}
	}
	return nil
}
