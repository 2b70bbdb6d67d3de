package readpast

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A batch is a set of jobs that join it over time, in any number of calls
// and transactions, and a finishing job that runs once the batch is
// sealed and every member has ended (docs/design/workflows.md,
// "Batches"). The finishing job is a blocked job like a flow's, its id
// the batch's; each member is one of its parents, through an edge of the
// batch's policy, and one more edge, the seal, holds it until SealBatch.
// The finishing job reads how its members ended with Job.Batch.

// MaxBatchJoin caps the jobs of one AddToBatch.
const MaxBatchJoin = MaxFlowJobs

// BatchParams opens a batch.
type BatchParams struct {
	// Finisher is the finishing job. It takes no UniqueKey.
	Finisher EnqueueParams
	// OnSuccess: the finishing job runs only if every member succeeds;
	// a member that fails for good or is cancelled cancels it at once
	// (the CancelChild policy). Otherwise it runs whatever the members'
	// outcomes (RunAnyway), and reads them from Job.Batch.
	OnSuccess bool
}

// Batch is where a batch stands.
type Batch struct {
	// ID is the batch's id: its finishing job's.
	ID int64 `json:"id"`
	// OnSuccess is BatchParams.OnSuccess.
	OnSuccess bool `json:"on_success"`
	// Sealed: no job joins any more; the finishing job is released once
	// every member has ended.
	Sealed bool `json:"sealed"`
	// Finisher is the finishing job as it is now.
	Finisher *Job `json:"finisher"`
	// Members counts the jobs that joined, less those pruned from history
	// since; the other counts split them by state: Live (blocked,
	// pending or running, retries included), Succeeded, Failed,
	// Cancelled.
	Members   int `json:"members"`
	Live      int `json:"live"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// BatchClosedError refuses a join to a batch that takes no more members:
// sealed, or its finishing job has ended (cancelled by an operator, or
// by a member of an OnSuccess batch that did not succeed). It unwraps to
// ErrInvalidState; nothing of the join is stored.
type BatchClosedError struct {
	// ID is the batch's id.
	ID int64
	// State is the finishing job's state when it has ended; empty when
	// the batch is sealed and its finishing job still waits.
	State JobState
}

// Error says why the batch takes no more members.
func (e *BatchClosedError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("batch %d is sealed: no job joins it: %v", e.ID, ErrInvalidState)
	}
	return fmt.Sprintf("batch %d's finishing job is %s: no job joins it: %v", e.ID, e.State, ErrInvalidState)
}

// Unwrap returns ErrInvalidState.
func (e *BatchClosedError) Unwrap() error { return ErrInvalidState }

// BatchClosed is the *BatchClosedError of batch id whose seal edge is in
// state seal and whose finishing job is in state fin, or nil when the
// batch takes members (open, its finishing job blocked). A finishing job
// that has ended, or left blocked without a seal (retried by hand after
// a cancel), says its state; one the seal released, or that waits for
// members under a seal, that the batch is sealed.
func BatchClosed(id int64, seal EdgeState, fin JobState) error {
	switch {
	case fin == StateBlocked && seal == EdgeOpen:
		return nil
	case fin.Final() || seal == EdgeOpen:
		return &BatchClosedError{ID: id, State: fin}
	}
	return &BatchClosedError{ID: id}
}

// BatchStore is implemented by stores that keep batches (both stores).
type BatchStore interface {
	// OpenBatch stores p's finishing job, blocked, and returns it: its
	// id is the batch's. p has been through BatchParams.Normalize.
	OpenBatch(ctx context.Context, p BatchParams) (*Job, error)
	// AddToBatch enqueues jobs (normalized, none with a UniqueKey) as
	// members of batch id, all or none, and returns them. ErrNotFound if
	// there is no such batch; a *BatchClosedError (ErrInvalidState) if
	// it is sealed or its finishing job has ended (an OnSuccess batch
	// whose member failed, or a cancelled one).
	AddToBatch(ctx context.Context, id int64, jobs []EnqueueParams) ([]*Job, error)
	// SealBatch seals batch id (sealing twice is sealing once) and
	// returns it; the finishing job is released now if every member has
	// ended. ErrNotFound if there is no such batch.
	SealBatch(ctx context.Context, id int64) (Batch, error)
	// Batch returns batch id; ErrNotFound if there is none.
	Batch(ctx context.Context, id int64) (Batch, error)
}

// BatchSQLTxStore is implemented by stores whose batches can be joined
// inside a caller's database/sql transaction (both stores): the members
// exist if and only if tx commits.
type BatchSQLTxStore interface {
	// AddToBatchSQLTx is BatchStore.AddToBatch inside tx.
	AddToBatchSQLTx(ctx context.Context, tx *sql.Tx, id int64, jobs []EnqueueParams) ([]*Job, error)
}

// Normalize checks p and fills in its finishing job's defaults, as
// EnqueueParams.Normalize does, a zero RunAt standing for now.
func (p BatchParams) Normalize(now time.Time) (BatchParams, error) {
	f, err := p.Finisher.Normalize(now)
	if err != nil {
		return p, prefixField("finisher.", err)
	}
	if p.Finisher.RunAt.IsZero() {
		f.RunAt = time.Time{} // now on the store's clock, as for Enqueue
	}
	if f.UniqueKey != "" {
		return p, invalid("finisher.unique_key", "a batch's finishing job takes no unique key")
	}
	p.Finisher = f
	return p, nil
}

// NormalizeBatchJobs checks jobs joining a batch and fills in their
// defaults, a zero RunAt standing for now. Errors are *FieldError naming
// jobs[i].
func NormalizeBatchJobs(jobs []EnqueueParams, now time.Time) ([]EnqueueParams, error) {
	if len(jobs) == 0 {
		return nil, invalid("jobs", "at least one job joins a batch")
	}
	if len(jobs) > MaxBatchJoin {
		return nil, invalid("jobs", "at most %d jobs join a batch in one call, not %d", MaxBatchJoin, len(jobs))
	}
	out := make([]EnqueueParams, len(jobs))
	for i, j := range jobs {
		p, err := j.Normalize(now)
		if err != nil {
			return nil, prefixField(fmt.Sprintf("jobs[%d].", i), err)
		}
		if j.RunAt.IsZero() {
			p.RunAt = time.Time{}
		}
		if p.UniqueKey != "" {
			return nil, invalid(fmt.Sprintf("jobs[%d].unique_key", i), "a member of a batch takes no unique key")
		}
		out[i] = p
	}
	return out, nil
}

// BatchPolicy is the policy of a batch's edges: each member's, and the
// seal's.
func BatchPolicy(onSuccess bool) EdgePolicy {
	if onSuccess {
		return CancelChild
	}
	return RunAnyway
}

// batchStore is the client's store as a BatchStore.
func (c *Client) batchStore(op string) (BatchStore, error) {
	bs, ok := c.store.(BatchStore)
	if !ok {
		return nil, fmt.Errorf("readpast: %s: store %T keeps no batches", op, c.store)
	}
	return bs, nil
}

// OpenBatch opens a batch with p's finishing job (BatchStore.OpenBatch),
// traced as Enqueue is, and returns the finishing job: its id is the
// batch's.
func (c *Client) OpenBatch(ctx context.Context, p BatchParams) (*Job, error) {
	bs, err := c.batchStore("OpenBatch")
	if err != nil {
		return nil, err
	}
	if p, err = p.Normalize(time.Now()); err != nil {
		return nil, err
	}
	out, err := c.EnqueueWith(ctx, func(ctx context.Context, ps []EnqueueParams) ([]*Job, error) {
		p.Finisher = ps[0]
		j, err := bs.OpenBatch(ctx, p)
		if err != nil {
			return nil, err
		}
		return []*Job{j}, nil
	}, p.Finisher)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// AddToBatch enqueues jobs as members of batch id (BatchStore.AddToBatch),
// traced as Enqueue is.
func (c *Client) AddToBatch(ctx context.Context, id int64, jobs ...EnqueueParams) ([]*Job, error) {
	bs, err := c.batchStore("AddToBatch")
	if err != nil {
		return nil, err
	}
	if jobs, err = NormalizeBatchJobs(jobs, time.Now()); err != nil {
		return nil, err
	}
	return c.EnqueueWith(ctx, func(ctx context.Context, ps []EnqueueParams) ([]*Job, error) {
		return bs.AddToBatch(ctx, id, ps)
	}, jobs...)
}

// AddToBatchSQLTx enqueues jobs as members of batch id inside the
// caller's database/sql transaction (BatchSQLTxStore), traced as Enqueue
// is.
func (c *Client) AddToBatchSQLTx(ctx context.Context, tx *sql.Tx, id int64, jobs ...EnqueueParams) ([]*Job, error) {
	bs, ok := c.store.(BatchSQLTxStore)
	if !ok {
		return nil, fmt.Errorf("readpast: AddToBatchSQLTx: store %T cannot join batches in a database/sql transaction", c.store)
	}
	jobs, err := NormalizeBatchJobs(jobs, time.Now())
	if err != nil {
		return nil, err
	}
	return c.EnqueueWith(ctx, func(ctx context.Context, ps []EnqueueParams) ([]*Job, error) {
		return bs.AddToBatchSQLTx(ctx, tx, id, ps)
	}, jobs...)
}

// SealBatch seals batch id (BatchStore.SealBatch).
func (c *Client) SealBatch(ctx context.Context, id int64) (Batch, error) {
	bs, err := c.batchStore("SealBatch")
	if err != nil {
		return Batch{}, err
	}
	return bs.SealBatch(ctx, id)
}

// Batch returns batch id (BatchStore.Batch).
func (c *Client) Batch(ctx context.Context, id int64) (Batch, error) {
	bs, err := c.batchStore("Batch")
	if err != nil {
		return Batch{}, err
	}
	return bs.Batch(ctx, id)
}

// Batch returns the batch j finishes, for a job a Client handed to a
// handler: how its members ended. ErrNotFound if j finishes no batch;
// ErrNoRelatives for a job not handed out by a client.
func (j *Job) Batch(ctx context.Context) (Batch, error) {
	bs, ok := j.flows.(BatchStore)
	if !ok || j.flows == nil {
		return Batch{}, ErrNoRelatives
	}
	return bs.Batch(ctx, j.ID)
}
