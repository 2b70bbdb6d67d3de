package readpast

import (
	"context"
	"database/sql"
	"time"
)

// Store is the storage SPI a Client runs on. The postgres and sqlite
// packages implement it; storetest holds the conformance suite every
// implementation must pass. Methods take params already validated by the
// Normalize helpers of this package, and validate again where a bad value
// could corrupt data.
//
// Every write by a worker (Complete, Fail, Extend, Release, Snooze) applies only when
// the job's id, claim token and running state all match; otherwise it
// changes nothing and reports ErrStaleToken (or ErrNotFound).
type Store interface {
	// Migrate brings the schema up to date. It fails with ErrSchemaTooNew
	// and touches nothing when the database is newer than this code.
	Migrate(ctx context.Context) error
	// Enqueue inserts jobs atomically (all or none) in one round trip and
	// returns them in order.
	Enqueue(ctx context.Context, jobs []EnqueueParams) ([]*Job, error)
	// Claim takes up to p.Limit claimable jobs in one statement, in order of
	// priority, run-at, id, skipping jobs other claimers hold, and gives each
	// a fresh token and a lease.
	Claim(ctx context.Context, p ClaimParams) ([]*Job, error)
	// Complete finishes running jobs as succeeded, in one transaction. The
	// returned slice has one entry per completion: nil, ErrStaleToken or
	// ErrNotFound. Completing again with the token that already completed
	// the job succeeds and changes nothing.
	Complete(ctx context.Context, cs []Completion) ([]error, error)
	// Fail records failed attempts: each job goes back to pending at its
	// RetryAt when attempts remain, or to failed for good. One entry per
	// failure as for Complete; a failure that Failure.Check refuses (a
	// RetryAt outside the years 1970 to 9999) gets that *FieldError and
	// changes nothing.
	Fail(ctx context.Context, fs []Failure) ([]error, error)
	// Extend renews a running job's lease to now+lease and returns the new
	// expiry.
	Extend(ctx context.Context, id int64, token string, lease time.Duration) (time.Time, error)
	// Release gives a running job back unworked: it is pending again at once
	// and the attempt is not counted.
	Release(ctx context.Context, id int64, token string) error
	// Snooze puts a running job back to pending at now+d (0 <= d <=
	// MaxSnooze) without counting the attempt, frees its group slot and
	// adds one to its Snoozes. Fenced like Release: a token that is not
	// current changes nothing and returns ErrStaleToken (ErrNotFound for
	// an unknown id). Limits on the number of snoozes are the caller's
	// (Config.MaxSnoozes).
	Snooze(ctx context.Context, id int64, token string, d time.Duration) error
	// Cancel moves a pending or running job to cancelled. A running job's
	// token stops being current. ErrInvalidState for a finished job.
	Cancel(ctx context.Context, id int64) (*Job, error)
	// CancelPending cancels a job only while it is pending, as Cancel
	// does (to history as cancelled, its unique key released): a running
	// job is left alone, its token still current, and it and finished
	// jobs give ErrInvalidState naming the state; an unknown id
	// ErrNotFound. A claim that takes the job first wins: CancelPending
	// then finds it running.
	CancelPending(ctx context.Context, id int64) (*Job, error)
	// CancelClaimed cancels job id as Cancel does, only while it runs
	// under token: the worker of an attempt cancelling its own job (a
	// handler's Cancel over HTTP). Any other token, or a job no longer
	// running under it (its lease expired and it was rescued, released,
	// finished), is ErrStaleToken and changes nothing. A job cancelled
	// while it ran under token, by this cancel or an operator's, is
	// returned as it is: a repeat of the cancel (its answer lost) is
	// accepted, as a repeated completion is. An unknown id is ErrNotFound.
	CancelClaimed(ctx context.Context, id int64, token string) (*Job, error)
	// Retry makes a job pending now: a failed or cancelled job comes back
	// from history with its attempts reset; a pending job runs now.
	// ErrInvalidState for running and succeeded jobs.
	Retry(ctx context.Context, id int64) (*Job, error)
	// RunNow makes a pending job due now ("Run now" for a scheduled job):
	// a job whose run-at is later than now gets now, at its place in
	// claim order behind the jobs due before it, and is claimable at once
	// (a grouped job as soon as its key has a free slot); a job due
	// already is returned unchanged. It never revives a job: running,
	// succeeded, failed and cancelled jobs give ErrInvalidState naming
	// the state, and an unknown id ErrNotFound. A claim that takes the
	// job first wins: RunNow then finds it running.
	RunNow(ctx context.Context, id int64) (*Job, error)
	// Delete deletes a finished (succeeded, failed or cancelled) job, its
	// tags, and its unique key if it still holds one. ErrInvalidState for
	// a pending or running job, ErrNotFound for an unknown id.
	Delete(ctx context.Context, id int64) error
	// BulkRetry retries, as Retry does, every failed and cancelled job
	// that f matches (f.Normalize(BulkRetryAction)), and returns how many
	// it retried. A job whose unique key another job holds is left alone.
	// Like every bulk action it works in batches of 1000 jobs, each
	// in a short transaction of its own, walking the matching jobs by id:
	// a job that matches only once the action has walked past its id is
	// not touched, and an error leaves the batches before it applied.
	// Every job that matched when the walk reached it is acted on: rows
	// other transactions hold are tried again, then waited for, within a
	// bound (PostgreSQL: 5 s in all). Jobs still held after that are
	// named in a *SkippedError (errors.Is ErrSkipped), returned with the
	// count of what the action did.
	BulkRetry(ctx context.Context, f JobFilter) (int, error)
	// BulkCancel cancels, as Cancel does, every pending and running job
	// that f matches (f.Normalize(BulkCancelAction)), and returns how many
	// it cancelled: cancelled running jobs' tokens stop being current,
	// their group slots are freed and their unique keys released. It
	// never makes a claim wait (PostgreSQL: it waits for rows other
	// transactions hold only while it holds no job row, and claims skip
	// the rows it holds).
	BulkCancel(ctx context.Context, f JobFilter) (int, error)
	// BulkDelete deletes, as Delete does, every finished job that f
	// matches (f.Normalize(BulkDeleteAction)), and returns how many it
	// deleted.
	BulkDelete(ctx context.Context, f JobFilter) (int, error)
	// Get returns a live or finished job.
	Get(ctx context.Context, id int64) (*Job, error)
	// List returns jobs matching p, newest first.
	List(ctx context.Context, p ListParams) (ListResult, error)
	// Stats counts jobs per queue and state.
	Stats(ctx context.Context) ([]QueueStats, error)
	// RescueExpired ends the claims whose lease has expired (at most limit
	// of them): back to pending when attempts remain, else failed for good.
	// It applies the same id, token and running check as a worker's write.
	RescueExpired(ctx context.Context, limit int) (int, error)
	// SetGroupLimit sets how many jobs of a group may run at once (default
	// 1): PutLimit of the group's own limit with that concurrency, its
	// rate kept.
	SetGroupLimit(ctx context.Context, group string, limit int) error
	// PutLimit declares the limit of l.Key (a key or a template, see
	// Limit), replacing the one declared for it, and reports whether it
	// created it. The keys it governs follow it from their next starts;
	// running jobs go on. It may wait for a claim or a finisher holding a
	// key's row; claims never wait for it (one that meets it passes the
	// keys it is changing over).
	PutLimit(ctx context.Context, l Limit) (bool, error)
	// GetLimit returns the limit declared for key (exactly: a key or a
	// template) with the states of the keys it governs, or
	// ErrLimitNotFound.
	GetLimit(ctx context.Context, key string) (*LimitInfo, error)
	// ListLimits returns every declared limit by key, as GetLimit does.
	ListLimits(ctx context.Context) ([]LimitInfo, error)
	// DeleteLimit deletes the limit declared for key, or returns
	// ErrLimitNotFound: the keys it governed follow the next longest
	// template they match, or the default.
	DeleteLimit(ctx context.Context, key string) error
	// TakeTokens takes n starts from key's rate for work done outside
	// jobs, all or none, and says whether it did and, if not, when n
	// could be. A key without a rate grants every request. The tokens
	// are the ones its jobs' claims take.
	TakeTokens(ctx context.Context, key string, n int) (TokenGrant, error)
	// PauseQueue stops claims, in every process, from taking the queue's
	// jobs: a claim that starts after PauseQueue returns takes none.
	// Enqueues still work and running jobs finish as usual. The pause
	// persists until ResumeQueue. Pausing a paused queue changes nothing.
	PauseQueue(ctx context.Context, queue string) error
	// ResumeQueue lets claims take the queue's jobs again and wakes the
	// workers waiting for them. Resuming a queue that is not paused
	// changes nothing.
	ResumeQueue(ctx context.Context, queue string) error
	// Queues lists every queue that has jobs or is paused, by name, with
	// its job counts per state and whether it is paused.
	Queues(ctx context.Context) ([]QueueInfo, error)
	// Prune deletes up to p.Limit finished jobs in p.State finished before
	// p.Before, and returns how many it deleted. It keeps a job whose
	// unique key's period (UniqueUntil) has not ended, so that the key
	// holds for its whole period, and every job an edge names: a
	// FlowPruner deletes those a flow at a time (PruneOnce calls both).
	Prune(ctx context.Context, p PruneParams) (int, error)
	// Close releases what the store opened itself.
	Close() error

	// PutSchedule creates the schedule p names, or replaces its
	// definition, and reports whether it created it. A replaced schedule
	// keeps its next tick when its cron expression and time zone are
	// unchanged and it stays running; otherwise its next tick is the first
	// after now. p.Paused nil keeps a stored schedule's state.
	PutSchedule(ctx context.Context, p ScheduleParams) (*Schedule, bool, error)
	// GetSchedule returns a schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, name string) (*Schedule, error)
	// ListSchedules returns every schedule by name.
	ListSchedules(ctx context.Context) ([]*Schedule, error)
	// DeleteSchedule deletes a schedule and its runs, or returns
	// ErrScheduleNotFound. Jobs it made stay.
	DeleteSchedule(ctx context.Context, name string) error
	// PauseSchedule pauses (no ticks until resumed) or resumes a schedule.
	// A resumed schedule goes on from its first tick after now: the ticks
	// of the pause are not caught up.
	PauseSchedule(ctx context.Context, name string, paused bool) (*Schedule, error)
	// ScheduleRuns returns up to limit of a schedule's latest runs (the
	// stores keep ScheduleRunsKept), newest first.
	ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRun, error)
	// DueSchedules returns up to limit running schedules whose next tick
	// is at or before now, earliest first.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]*Schedule, error)
	// FireSchedule applies f if the schedule is still at f.Version with
	// its next tick at f.Expect, in one transaction: it enqueues the
	// tick's job (when f.Tick is set), records the run and moves the next
	// tick to f.Next. It reports whether it applied f: false means another
	// scheduler fired that tick, or the schedule changed, and nothing was
	// done. The check and the move are one conditional update of the
	// schedule's row, so each tick makes exactly one job however many
	// schedulers race for it.
	FireSchedule(ctx context.Context, f Firing) (fired bool, job *Job, err error)
}

// Notifier is implemented by stores that can wake claimers when jobs are
// enqueued. Wake-ups are coalesced: a signal means "look again", not "one job".
type Notifier interface {
	// Subscribe returns a channel that receives a value soon after jobs
	// become claimable. The channel is closed when ctx ends.
	Subscribe(ctx context.Context) (<-chan struct{}, error)
}

// SQLTxStore is implemented by stores whose enqueues and completions can
// join a caller's database/sql transaction, so that the jobs exist, or the
// completion stands, if and only if the caller's own writes commit. Both
// stores implement it: SQLite on a transaction of its sqlite.Store.DB(),
// PostgreSQL on a transaction of a *sql.DB opened with pgx's stdlib driver
// (PostgreSQL also takes a pgx.Tx: postgres.Store.EnqueueTx and CompleteTx).
type SQLTxStore interface {
	// EnqueueSQLTx inserts jobs inside tx, validated as Enqueue does.
	EnqueueSQLTx(ctx context.Context, tx *sql.Tx, jobs []EnqueueParams) ([]*Job, error)
	// CompleteSQLTx finishes one running job as succeeded inside tx. It
	// returns nil, ErrStaleToken or ErrNotFound as Complete does for one
	// entry, or a *FieldError for a result that cannot be stored.
	CompleteSQLTx(ctx context.Context, tx *sql.Tx, c Completion) error
}

// GroupPruner is implemented by stores that keep a row per concurrency
// group (key) and delete the rows of idle keys in the background (both
// stores). RunRescuer calls it every 240 rescue intervals.
type GroupPruner interface {
	// PruneGroups deletes up to limit rows of keys that run nothing and
	// whose bucket is full (what a missing row means; declared limits
	// stay), and returns how many it deleted. It never waits on, and never
	// makes wait, a claim or an enqueue.
	PruneGroups(ctx context.Context, limit int) (int, error)
}

// Tidier is implemented by stores whose tables need help between the
// database's own clean-ups (PostgreSQL: every claim and finish leaves a
// dead row in the live jobs table, and claims walk those that are not yet
// vacuumed). RunRescuer calls Tidy every 4 rescue intervals.
type Tidier interface {
	// Tidy does what is due, returns how many tables it cleaned, and never
	// makes a claim or a write wait.
	Tidy(ctx context.Context) (int, error)
}

// SchemaVersioner is implemented by stores that report their schema
// version, for `readpast migrate status`.
type SchemaVersioner interface {
	// SchemaVersion returns the database's schema version (0 before the
	// first migration) and the latest version this code knows.
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

// FlowPruner is implemented by stores that keep flows (FlowStore). Their
// Prune leaves every job an edge names; PruneFlows deletes those a flow
// at a time, so that a flow's rows leave history together
// (docs/design/workflows.md, "Retention").
type FlowPruner interface {
	// PruneFlows looks at up to p.Limit jobs that edges name, those with
	// ids above p.After, in id order. It deletes the flow of each, in one
	// statement, when every job of that flow has finished before the
	// cutoff of its state, its unique key's period has ended, and none
	// holds back a blocked child or has a live child in another flow. It
	// returns how many jobs it deleted and the last id it looked at, to
	// pass as the next call's After; 0 when none was left.
	PruneFlows(ctx context.Context, p FlowPruneParams) (deleted int, next int64, err error)
}

// A flow, for retention, is the jobs one EnqueueFlow call stored, joined
// by the edges between them, or a batch: its finishing job and every
// member. An edge to a job stored earlier (After.JobID) joins no flows:
// that job leaves by its own age, once no job that runs after it is
// live.

// FlowPruneParams selects the flows PruneFlows deletes. A zero cutoff
// keeps the jobs of that state, and every flow that has one.
type FlowPruneParams struct {
	Succeeded, Failed, Cancelled time.Time // cutoffs: finished before
	After                        int64     // the last id the previous call looked at
	// Limit is how many jobs with edges one call looks at; 0 means 1000.
	Limit int
}

// Cutoff returns the cutoff p gives state (zero: keep).
func (p FlowPruneParams) Cutoff(state JobState) time.Time {
	switch state {
	case StateSucceeded:
		return p.Succeeded
	case StateFailed:
		return p.Failed
	case StateCancelled:
		return p.Cancelled
	}
	return time.Time{}
}

// Normalize fills the default limit and checks p.
func (p FlowPruneParams) Normalize() (FlowPruneParams, error) {
	if p.Limit == 0 {
		p.Limit = 1000
	}
	if p.Limit < 1 || p.Limit > 100000 {
		return p, invalid("limit", "must be between 1 and 100000")
	}
	if p.After < 0 {
		return p, invalid("after", "must not be negative")
	}
	return p, nil
}

// MaxFlowPrune bounds the flows PruneFlows deletes: a flow (a batch, in
// practice) of more jobs is kept whole, to be deleted by hand.
const MaxFlowPrune = 100000

// PruneParams selects finished jobs to delete.
type PruneParams struct {
	State  JobState
	Before time.Time
	// Limit defaults to 1000.
	Limit int
}
