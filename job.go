package readpast

import (
	"encoding/json"
	"time"
)

// JobState is where a job is in its life. The HTTP API exposes these names.
//
//	pending ──claim──▶ running ──complete──▶ succeeded
//	   ▲                 │ │ └──cancel──────▶ cancelled
//	   │                 │ └─fail/expire (attempts used up)──▶ failed
//	   └──fail/expire/release (attempts left)
//	pending ──cancel──▶ cancelled      failed|cancelled ──retry──▶ pending
//	blocked ──its parents succeed──▶ pending    blocked ──cancel──▶ cancelled
//
// blocked, pending and running jobs live in the live table that claims scan; the
// three final states live in the history table.
type JobState string

// The job states.
const (
	// StateBlocked: waiting for the jobs it runs after (FlowJob.After);
	// never claimed. See docs/design/workflows.md.
	StateBlocked JobState = "blocked"
	// StatePending: waiting to run, now or at RunAt.
	StatePending JobState = "pending"
	// StateRunning: held by a worker under a lease.
	StateRunning JobState = "running"
	// StateSucceeded: completed by its handler. Final.
	StateSucceeded JobState = "succeeded"
	// StateFailed: every attempt failed. Final until retried by hand.
	StateFailed JobState = "failed"
	// StateCancelled: cancelled before it could finish. Final until retried by hand.
	StateCancelled JobState = "cancelled"
)

// AllStates lists every state in lifecycle order.
var AllStates = []JobState{StateBlocked, StatePending, StateRunning, StateSucceeded, StateFailed, StateCancelled}

// Valid reports whether s is one of the six states.
func (s JobState) Valid() bool {
	switch s {
	case StateBlocked, StatePending, StateRunning, StateSucceeded, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Final reports whether s is a final state (the job is in history).
func (s JobState) Final() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled
}

// AttemptError records why one attempt did not succeed.
type AttemptError struct {
	// Attempt is the attempt number (1-based) that failed.
	Attempt int `json:"attempt"`
	// At is when the failure was recorded.
	At time.Time `json:"at"`
	// Message is the error text.
	Message string `json:"message"`
	// Stack is the goroutine stack when the handler panicked.
	Stack string `json:"stack,omitempty"`
	// Worker is the worker that held the job.
	Worker string `json:"worker,omitempty"`
}

// Job is one row of the queue, live or finished.
type Job struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	State       JobState        `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	RunAt       time.Time       `json:"run_at"`
	// Group is the concurrency group key; nil for an ungrouped job.
	Group *string `json:"group"`
	// Keys are the job's flow-control keys (EnqueueParams.Keys), its
	// Group first; empty for a job without keys.
	Keys []string `json:"keys,omitempty"`
	// Token is the current claim's token while running (and the last claim's
	// token once finished). Empty when never claimed.
	Token string `json:"-"`
	// LeaseExpiresAt is set while running.
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	// Worker is the worker that holds or last held the job.
	Worker     string          `json:"worker,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Errors     []AttemptError  `json:"errors"`
	Result     json.RawMessage `json:"result,omitempty"`
	// UniqueKey is the job's unique key; empty for none. The job keeps it
	// for its whole life, retries included.
	UniqueKey string `json:"unique_key,omitempty"`
	// UniqueUntil is when the key's period ends (EnqueueParams.UniqueFor
	// after the enqueue); nil when the key is held only while the job is
	// pending or running.
	UniqueUntil *time.Time `json:"unique_until,omitempty"`
	// Duplicate is set on what Enqueue returns for an entry whose unique
	// key was held: nothing was created, and this is the job that holds
	// the key (pending, running, or finished within the key's period).
	Duplicate bool `json:"duplicate,omitempty"`
	// Tags are the job's tags (EnqueueParams.Tags), each once, in the
	// order given; empty for none.
	Tags []string `json:"tags"`
	// Snoozes counts how many times a handler snoozed the job
	// (Store.Snooze). A manual Retry resets it.
	Snoozes int `json:"snoozes"`
	// Traceparent and Tracestate are the job's creation context, as the
	// W3C Trace Context headers of that name: the context of the span
	// that enqueued it (or the one its enqueue was given). Empty when it
	// was enqueued outside any trace. What Enqueue and Claim return
	// carries them; see docs/design/tracing.md.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`

	// flows reads the job's relatives for Parents and ParentResults: set
	// on the jobs a Client hands to handlers.
	flows FlowInspector
}

// EnqueueParams describes one job to enqueue. Zero values take defaults.
type EnqueueParams struct {
	// Kind selects the handler. Required.
	Kind string
	// Payload is the job's JSON arguments. Defaults to {}.
	Payload json.RawMessage
	// Queue defaults to DefaultQueue.
	Queue string
	// Priority: lower runs first. Defaults to 0; must be within
	// [MinPriority, MaxPriority].
	Priority int
	// RunAt: not claimable before this time. Zero means now.
	RunAt time.Time
	// MaxAttempts defaults to DefaultMaxAttempts.
	MaxAttempts int
	// Group is the concurrency group key; empty for none. It is the
	// job's first key: Group "g" is the same as Keys ["g"].
	Group string
	// Keys name the limits the job is held to (Store.PutLimit): at most
	// MaxKeys distinct names, each like a queue's. The job starts only
	// when every key allows it: fewer running than its concurrency, and a
	// token in its bucket; it then counts as running on each and spends a
	// token of each. The first key is its stream (as Group): its turn,
	// weight and order among that key's jobs. Giving both, Group must be
	// Keys[0]. See docs/design/flow-control.md, "Jobs with several keys".
	Keys []string
	// UniqueKey makes the enqueue idempotent: while a job with this key
	// holds it, enqueueing the key again creates nothing and returns the
	// holder with Duplicate set. A job holds its key while it is pending
	// or running (retries included), and, with UniqueFor, until UniqueFor
	// after its enqueue whatever its outcome. See docs/design/unique.md,
	// "Unique jobs", for the scopes. Empty for none.
	UniqueKey string
	// UniqueFor keeps the key held for this long after the enqueue, even
	// once the job has finished (succeeded, failed or cancelled), so that
	// an enqueue retried after a lost answer creates nothing. Zero: the
	// key is freed when the job finishes. Otherwise 1s to MaxUniqueFor, as
	// over HTTP. Requires UniqueKey.
	UniqueFor time.Duration
	// Tags label the job for listing (ListParams.Tag) and bulk actions
	// (JobFilter.Tag): at most MaxTags, each a name like a queue's
	// (1..MaxNameLen printable characters without spaces). A tag given
	// twice is kept once. Tags never change after the enqueue.
	Tags []string
	// Traceparent (and Tracestate, which needs it) give the job a
	// creation context of the caller's own, in the W3C Trace Context
	// format: the job's process spans continue that trace. A Client with
	// a TracerProvider fills them with its producer span's context when
	// they are empty, and keeps them (linking its span to them) when they
	// are not. Empty for none.
	Traceparent string
	Tracestate  string
}

// Defaults and limits shared by every store.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 25
	MinPriority        = -1000
	MaxPriority        = 1000
	MaxNameLen         = 128
	MaxAttemptsLimit   = 1000
	// MaxUniqueKeyLen caps a unique key, in bytes.
	MaxUniqueKeyLen = 255
	// MaxUniqueFor caps EnqueueParams.UniqueFor.
	MaxUniqueFor = 366 * 24 * time.Hour
	// MaxTags caps EnqueueParams.Tags.
	MaxTags = 20
	// MaxKeys caps EnqueueParams.Keys.
	MaxKeys = 4
	// MaxSnooze caps the delay of one snooze (Store.Snooze).
	MaxSnooze = 366 * 24 * time.Hour
)

// ClaimParams asks for up to Limit jobs.
type ClaimParams struct {
	// Queues to claim from. Empty means DefaultQueue.
	Queues []string
	// Worker identifies the claimer; recorded on the job.
	Worker string
	// Limit is the most jobs to claim (at least 1).
	Limit int
	// Lease is how long the claim is valid unless extended.
	Lease time.Duration
}

// Completion finishes one running job as succeeded.
type Completion struct {
	ID     int64
	Token  string
	Result json.RawMessage
}

// Failure records one failed attempt of a running job. The job is retried at
// RetryAt when attempts remain, otherwise it fails for good. A zero RetryAt
// means now.
type Failure struct {
	ID      int64
	Token   string
	Message string
	Stack   string
	RetryAt time.Time
	// Discard fails the job for good whatever attempts remain.
	Discard bool
}

// ListParams filters a job listing. Zero fields do not filter.
type ListParams struct {
	Queue string
	State JobState
	Kind  string
	Group string
	// Tag keeps the jobs that carry this tag.
	Tag string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor continues a previous listing (from ListResult.Next).
	Cursor string
}

// ListResult is one page of jobs, newest first.
type ListResult struct {
	Jobs []*Job
	// Next is the cursor of the next page: the id of this page's last
	// job, in decimal (ListParams.Normalize accepts nothing else). Empty
	// at the end.
	Next string
}

// QueueStats counts the jobs of one queue in one state.
type QueueStats struct {
	Queue string   `json:"queue"`
	State JobState `json:"state"`
	Count int64    `json:"count"`
}

// QueueInfo is one queue as an operator sees it.
type QueueInfo struct {
	Name string `json:"name"`
	// Paused: claims take none of its jobs (Store.PauseQueue).
	Paused bool `json:"paused"`
	// PausedAt is when it was paused; nil unless Paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Counts holds its jobs per state; states without jobs are absent.
	Counts map[JobState]int64 `json:"counts"`
}

// JobFilter selects the jobs of a bulk action (Store.BulkRetry, BulkCancel,
// BulkDelete). A job matches when it matches every field that is set; at
// least one must be set, so that no bulk action touches every job by
// accident.
type JobFilter struct {
	Queue string `json:"queue,omitempty"`
	Kind  string `json:"kind,omitempty"`
	// State narrows the states the action applies to; it must be one of
	// them (BulkRetry: failed, cancelled; BulkCancel: pending, running;
	// BulkDelete: succeeded, failed, cancelled).
	State JobState `json:"state,omitempty"`
	Tag   string   `json:"tag,omitempty"`
	Group string   `json:"group,omitempty"`
}
