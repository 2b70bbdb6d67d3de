package readpast

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// EdgePolicy says what becomes of a job when one of the jobs it runs
// after ends without succeeding (failed for good, cancelled, or rescued
// with no attempts left). Retries and snoozes of the parent decide
// nothing: only its final transition does.
type EdgePolicy string

// The edge policies.
const (
	// CancelChild (the default) cancels the child, with an error naming
	// the parent, in the parent's own transaction; the child's children
	// follow their own edges to it in turn.
	CancelChild EdgePolicy = "cancel_child"
	// RunAnyway counts the edge as satisfied whatever the parent's outcome.
	RunAnyway EdgePolicy = "run_anyway"
	// HoldChild keeps the child blocked, in plain view, until the parent
	// is retried and succeeds, or someone cancels the child.
	HoldChild EdgePolicy = "hold_child"
)

// Valid reports whether p is one of the three policies.
func (p EdgePolicy) Valid() bool {
	return p == CancelChild || p == RunAnyway || p == HoldChild
}

// Limits on flows.
const (
	// MaxFlowJobs caps the jobs of one EnqueueFlow.
	MaxFlowJobs = 1000
	// MaxParents caps the edges of one job.
	MaxParents = 10000
	// MaxFlowDepth caps the longest chain of edges (parent, child,
	// grandchild, ...) a flow makes, counting the chains above the
	// earlier jobs it names as parents: a cancellation runs down a chain
	// in one transaction.
	MaxFlowDepth = 100
)

// After is one edge of a flow: the job that names it runs only once the
// parent it points at has succeeded (or ended otherwise, by Policy).
// Exactly one of Ref and JobID is set.
type After struct {
	// Ref names a job of the same EnqueueFlow call by its FlowJob.Ref.
	Ref string
	// JobID names a job enqueued before: it must be pending, running or
	// blocked when the flow is stored.
	JobID int64
	// Policy applies when the parent ends without succeeding; empty
	// means CancelChild.
	Policy EdgePolicy
}

// FlowJob is one job of a flow.
type FlowJob struct {
	// Ref names the job within its flow so that other jobs of the flow
	// can run after it. Optional for a job no other job of the flow
	// names; unique within the flow.
	Ref string
	// Job is the job to enqueue. A job of a flow takes no UniqueKey.
	Job EnqueueParams
	// After lists the jobs this one waits for: it is blocked until each
	// of them has succeeded (or ended otherwise, by the edge's Policy).
	After []After
}

// ParentError refuses a flow for an earlier job it names as a parent by
// id that is not live: unknown (it unwraps to ErrNotFound) or finished
// (ErrInvalidState; State says how it ended). Nothing of the flow is
// stored.
type ParentError struct {
	// ID is the parent's job id.
	ID int64
	// State is the parent's state; empty when no job has the id.
	State JobState
}

// Error names the parent and what is wrong with it.
func (e *ParentError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("parent job %d: %v", e.ID, ErrNotFound)
	}
	return fmt.Sprintf("parent job %d is %s already: %v", e.ID, e.State, ErrInvalidState)
}

// Unwrap returns ErrNotFound for an unknown parent, else ErrInvalidState.
func (e *ParentError) Unwrap() error {
	if e.State == "" {
		return ErrNotFound
	}
	return ErrInvalidState
}

// FlowStore is implemented by stores that keep jobs' dependencies (both
// stores). See docs/design/workflows.md.
type FlowStore interface {
	// EnqueueFlow inserts jobs and the edges between them atomically (all
	// or none) and returns the jobs in order: those with edges blocked,
	// the others pending. jobs must have been through NormalizeFlow. An
	// edge to a job of an earlier call that is not live fails the whole
	// call: ErrNotFound or ErrInvalidState, naming the job.
	EnqueueFlow(ctx context.Context, jobs []FlowJob) ([]*Job, error)
}

// FlowSQLTxStore is implemented by stores whose flows can join a
// caller's database/sql transaction (as SQLTxStore for Enqueue): the
// jobs and edges exist if and only if tx commits.
type FlowSQLTxStore interface {
	// EnqueueFlowSQLTx is EnqueueFlow inside tx.
	EnqueueFlowSQLTx(ctx context.Context, tx *sql.Tx, jobs []FlowJob) ([]*Job, error)
}

// FlowResolver is implemented by stores that leave the edges of a parent
// with very many children partly to a background resolver, so that the
// parent's own final statement stays short (PostgreSQL). RunRescuer calls
// ResolveFlows at every tick.
type FlowResolver interface {
	// ResolveFlows resolves up to limit edges that finished parents left
	// unresolved, and returns how many it resolved.
	ResolveFlows(ctx context.Context, limit int) (int, error)
}

// FlowBacklogWaker is implemented by flow resolvers that can tell when a
// parent, in any process, has left edges to the resolver (PostgreSQL,
// through NOTIFY): RunRescuer then resolves them at once instead of at
// its next tick.
type FlowBacklogWaker interface {
	// FlowBacklog receives a value when edges were left to the resolver
	// since the last one was received.
	FlowBacklog() <-chan struct{}
}

// NormalizeFlow checks a flow and fills defaults into its jobs (as
// EnqueueParams.Normalize does, now standing for a zero RunAt): refs
// unique, every edge naming exactly one parent that exists in the flow
// (or an earlier job by id), no job twice among one job's parents, and no
// cycle. Errors are *FieldError naming jobs[i] and the field, never "a
// missing parent, so satisfied".
func NormalizeFlow(jobs []FlowJob, now time.Time) ([]FlowJob, error) {
	if len(jobs) == 0 {
		return nil, invalid("jobs", "a flow needs at least one job")
	}
	if len(jobs) > MaxFlowJobs {
		return nil, invalid("jobs", "a flow holds at most %d jobs, not %d", MaxFlowJobs, len(jobs))
	}
	out := make([]FlowJob, len(jobs))
	refs := make(map[string]int, len(jobs))
	for i, fj := range jobs {
		p, err := fj.Job.Normalize(now)
		if err != nil {
			return nil, prefixField(fmt.Sprintf("jobs[%d].", i), err)
		}
		if fj.Job.RunAt.IsZero() {
			p.RunAt = time.Time{} // now on the store's clock, as for Enqueue
		}
		if p.UniqueKey != "" {
			return nil, invalid(fmt.Sprintf("jobs[%d].unique_key", i), "a job of a flow takes no unique key")
		}
		if fj.Ref != "" {
			if err := checkName(fmt.Sprintf("jobs[%d].ref", i), fj.Ref, true); err != nil {
				return nil, err
			}
			if j, dup := refs[fj.Ref]; dup {
				return nil, invalid(fmt.Sprintf("jobs[%d].ref", i), "%q is the ref of jobs[%d] already", fj.Ref, j)
			}
			refs[fj.Ref] = i
		}
		out[i] = FlowJob{Ref: fj.Ref, Job: p}
	}
	for i, fj := range jobs {
		if len(fj.After) > MaxParents {
			return nil, invalid(fmt.Sprintf("jobs[%d].after", i), "a job runs after at most %d jobs, not %d", MaxParents, len(fj.After))
		}
		seenRef := map[string]bool{}
		seenID := map[int64]bool{}
		edges := make([]After, len(fj.After))
		for k, a := range fj.After {
			field := fmt.Sprintf("jobs[%d].after[%d]", i, k)
			if a.Policy == "" {
				a.Policy = CancelChild
			}
			if !a.Policy.Valid() {
				return nil, invalid(field+".policy", "must be %s, %s or %s, not %q", CancelChild, RunAnyway, HoldChild, a.Policy)
			}
			switch {
			case (a.Ref == "") == (a.JobID == 0):
				return nil, invalid(field, "names its parent by exactly one of ref and job_id")
			case a.JobID < 0:
				return nil, invalid(field+".job_id", "must be a job id, not %d", a.JobID)
			case a.Ref != "":
				j, ok := refs[a.Ref]
				if !ok {
					return nil, invalid(field+".ref", "no job of the flow has the ref %q", a.Ref)
				}
				if j == i {
					return nil, invalid(field+".ref", "a job cannot run after itself")
				}
				if seenRef[a.Ref] {
					return nil, invalid(field+".ref", "%q is among the job's parents already", a.Ref)
				}
				seenRef[a.Ref] = true
			default:
				if seenID[a.JobID] {
					return nil, invalid(field+".job_id", "job %d is among the job's parents already", a.JobID)
				}
				seenID[a.JobID] = true
			}
			edges[k] = a
		}
		out[i].After = edges
	}
	if i, ok := flowCycle(out, refs); ok {
		return nil, invalid(fmt.Sprintf("jobs[%d].after", i), "the flow's edges make a cycle through the job with ref %q", out[i].Ref)
	}
	if err := CheckFlowDepth(out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckFlowDepth refuses a flow (normalized, so without cycles) whose
// longest chain of edges would pass MaxFlowDepth, given the length of the
// longest chain of parents above each earlier job it names as parent
// (missing: none).
func CheckFlowDepth(flow []FlowJob, above map[int64]int) error {
	refs := make(map[string]int, len(flow))
	for i, fj := range flow {
		if fj.Ref != "" {
			refs[fj.Ref] = i
		}
	}
	depth := make([]int, len(flow))
	done := make([]bool, len(flow))
	var visit func(i int) int
	visit = func(i int) int {
		if done[i] {
			return depth[i]
		}
		d := 0
		for _, a := range flow[i].After {
			if a.Ref != "" {
				d = max(d, visit(refs[a.Ref])+1)
			} else {
				d = max(d, above[a.JobID]+1)
			}
		}
		depth[i], done[i] = d, true
		return d
	}
	for i := range flow {
		if d := visit(i); d > MaxFlowDepth {
			return invalid(fmt.Sprintf("jobs[%d].after", i), "the job would be %d edges below the top of its flow, and a flow goes at most %d deep", d, MaxFlowDepth)
		}
	}
	return nil
}

// flowCycle reports a job on a cycle of the flow's ref edges, if any
// (Kahn's algorithm: what is never freed lies on or behind a cycle; the
// first such job whose parents are all unfreed lies on one).
func flowCycle(jobs []FlowJob, refs map[string]int) (int, bool) {
	waiting := make([]int, len(jobs))
	children := make([][]int, len(jobs))
	for i, fj := range jobs {
		for _, a := range fj.After {
			if a.Ref != "" {
				p := refs[a.Ref]
				children[p] = append(children[p], i)
				waiting[i]++
			}
		}
	}
	var free []int
	for i, n := range waiting {
		if n == 0 {
			free = append(free, i)
		}
	}
	freed := 0
	for len(free) > 0 {
		p := free[len(free)-1]
		free = free[:len(free)-1]
		freed++
		for _, c := range children[p] {
			if waiting[c]--; waiting[c] == 0 {
				free = append(free, c)
			}
		}
	}
	if freed == len(jobs) {
		return 0, false
	}
	// Walk parents from an unfreed job: on a finite graph the walk meets
	// a job twice, and that job is on a cycle.
	i := 0
	for waiting[i] == 0 {
		i++
	}
	seen := map[int]bool{}
	for !seen[i] {
		seen[i] = true
		for _, a := range jobs[i].After {
			if p, ok := refs[a.Ref]; a.Ref != "" && ok && waiting[p] > 0 {
				i = p
				break
			}
		}
	}
	return i, true
}

// prefixField puts prefix before the field a *FieldError names (the
// field of an element: jobs[2].kind, job.kind); other errors pass as
// they are.
func prefixField(prefix string, err error) error {
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Field: prefix + fe.Field, Message: fe.Message}
	}
	return err
}

// EnqueueFlow adds a flow's jobs and edges through the client's store
// (which must implement FlowStore), traced as Enqueue is.
func (c *Client) EnqueueFlow(ctx context.Context, jobs ...FlowJob) ([]*Job, error) {
	fs, ok := c.store.(FlowStore)
	if !ok {
		return nil, fmt.Errorf("readpast: EnqueueFlow: store %T keeps no flows", c.store)
	}
	return c.enqueueFlow(ctx, fs.EnqueueFlow, jobs)
}

// EnqueueFlowSQLTx adds a flow inside the caller's database/sql
// transaction (FlowSQLTxStore), traced as Enqueue is.
func (c *Client) EnqueueFlowSQLTx(ctx context.Context, tx *sql.Tx, jobs ...FlowJob) ([]*Job, error) {
	fs, ok := c.store.(FlowSQLTxStore)
	if !ok {
		return nil, fmt.Errorf("readpast: EnqueueFlowSQLTx: store %T cannot store flows in a database/sql transaction", c.store)
	}
	return c.enqueueFlow(ctx, func(ctx context.Context, jobs []FlowJob) ([]*Job, error) {
		return fs.EnqueueFlowSQLTx(ctx, tx, jobs)
	}, jobs)
}

// enqueueFlow normalizes jobs and stores them through insert inside the
// producer spans of their enqueue.
func (c *Client) enqueueFlow(ctx context.Context, insert func(context.Context, []FlowJob) ([]*Job, error), jobs []FlowJob) ([]*Job, error) {
	flow, err := NormalizeFlow(jobs, time.Now())
	if err != nil {
		return nil, err
	}
	params := make([]EnqueueParams, len(flow))
	for i := range flow {
		params[i] = flow[i].Job
	}
	return c.EnqueueWith(ctx, func(ctx context.Context, ps []EnqueueParams) ([]*Job, error) {
		for i := range flow {
			flow[i].Job = ps[i]
		}
		return insert(ctx, flow)
	}, params...)
}
