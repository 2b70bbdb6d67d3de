package httpapi

import (
	"encoding/json"
	"time"

	"github.com/readpast/readpast"
)

// Request limits that are not in the root package.
const (
	// DefaultLeaseSeconds is the lease of a claim or heartbeat that does
	// not ask for one.
	DefaultLeaseSeconds = 60
	// MaxWaitSeconds caps a claim's long-poll wait.
	MaxWaitSeconds = 300
	// MaxClaimQueues caps how many queues one claim may name.
	MaxClaimQueues = 100
	// MaxTokenLen caps the length of a claim token in a request.
	MaxTokenLen = 1024
	// DefaultMaxBodyBytes is the request body limit when Config leaves it 0.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxBatch is the batch size limit when Config leaves it 0.
	DefaultMaxBatch = 1000
)

// EnqueueRequest is the body of POST /v1/jobs and one element of a batch.
type EnqueueRequest struct {
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Queue       string          `json:"queue,omitempty" empty:"no"`
	Priority    *int            `json:"priority,omitempty"`
	RunAt       *string         `json:"run_at,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	Group       *string         `json:"group,omitempty"`
	// Keys are the job's flow-control keys (readpast.EnqueueParams.Keys):
	// at most readpast.MaxKeys, the first its group. Given with Group,
	// Group must be Keys[0].
	Keys []string `json:"keys,omitempty"`
	// UniqueKey makes the enqueue idempotent (readpast.EnqueueParams.UniqueKey).
	UniqueKey *string `json:"unique_key,omitempty"`
	// UniqueForSeconds keeps the key held this long after the enqueue,
	// whatever the job's outcome (readpast.EnqueueParams.UniqueFor).
	UniqueForSeconds *float64 `json:"unique_for_seconds,omitempty"`
	// Tags label the job (readpast.EnqueueParams.Tags).
	Tags []string `json:"tags,omitempty"`
}

// batchRequest is the body of POST /v1/jobs/batch. Its elements are decoded
// one by one so errors can name the element.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// ClaimRequest is the body of POST /v1/claim.
type ClaimRequest struct {
	Worker       string   `json:"worker"`
	Queues       []string `json:"queues,omitempty"`
	Limit        *int     `json:"limit,omitempty"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
	WaitSeconds  *float64 `json:"wait_seconds,omitempty"`
	// ParentResults asks for each claimed job that runs after others to
	// carry its parents' results (Job.ParentResults): one more statement
	// per store claim, none when left false.
	ParentResults bool `json:"parent_results,omitempty"`
}

// CompleteRequest is the body of POST /v1/jobs/{id}/complete.
type CompleteRequest struct {
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of POST /v1/jobs/{id}/fail.
type FailRequest struct {
	Token string `json:"token"`
	// Error and Stack are free text: stored as readpast.Failure.Normalize
	// cleans them, never refused for their characters.
	Error   *string `json:"error" text:"free"`
	Stack   string  `json:"stack,omitempty" text:"free"`
	RetryAt *string `json:"retry_at,omitempty"`
	// Discard fails the job for good whatever attempts remain.
	Discard bool `json:"discard,omitempty"`
}

// HeartbeatRequest is the body of POST /v1/jobs/{id}/heartbeat.
type HeartbeatRequest struct {
	Token        string   `json:"token"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
}

// ReleaseRequest is the body of POST /v1/jobs/{id}/release.
type ReleaseRequest struct {
	Token string `json:"token"`
}

// CancelRequest is the optional body of POST /v1/jobs/{id}/cancel. With a
// token, the worker of an attempt cancels its own job, only while the
// token is its current claim; without one the job is cancelled whatever
// its claim.
type CancelRequest struct {
	Token *string `json:"token,omitempty"`
}

// SnoozeRequest is the body of POST /v1/jobs/{id}/snooze.
type SnoozeRequest struct {
	Token string `json:"token"`
	// Seconds is how long the job sleeps: 0 to readpast.MaxSnooze.
	Seconds *float64 `json:"seconds"`
}

// BulkRequest is the body of POST /v1/bulk/retry, /cancel and /delete: a
// readpast.JobFilter with at least one field set.
type BulkRequest = readpast.JobFilter

// BulkResponse is the answer to a bulk action: how many jobs it changed,
// and the jobs it matched and skipped because other transactions held
// them (readpast.SkippedError; empty, never null, when there are none).
type BulkResponse struct {
	Count   int     `json:"count"`
	Skipped []int64 `json:"skipped"`
}

// claimArgs is a decoded claim request.
type claimArgs struct {
	Params readpast.ClaimParams
	Wait   time.Duration
	// ParentResults: the claimed jobs carry their parents' results.
	ParentResults bool
}

// failArgs is a decoded fail request. A zero RetryAt means the server's
// retry policy picks it.
type failArgs struct {
	Token   string
	Message string
	Stack   string
	RetryAt time.Time
	Discard bool
}
