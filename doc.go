// Package readpast is a durable job queue that lives in a SQL table.
//
// Producers enqueue jobs, each a kind, a JSON payload and options (queue,
// priority, run-at, max attempts, concurrency group); workers on any
// number of machines claim them concurrently without waiting on each
// other, and every job's history stays queryable after it finishes.
//
// # Stores
//
// A Store holds the jobs. The postgres package is the server engine (any
// number of workers on any number of hosts share one PostgreSQL); the
// sqlite package is the embedded default (one file); the stores package
// opens either from a URL. Both pass the same conformance suite (package
// storetest), so the semantics below hold on both, with the differences
// documented in docs/sqlite.md.
//
// # Working jobs
//
// NewWorkers and Workers.Handle (or HandleTyped, for a typed payload)
// register a handler per kind; NewClient and Client.Start run a pool of
// workers per queue that claim jobs in batches, keep each job's lease
// alive until its outcome is written, retry failures with backoff
// (RetryPolicy; Permanent to give up), end handlers at their timeout
// (HandlerOptions.Timeout and JobTimeout, Config.JobTimeout), record panics
// with their stack, and release unfinished jobs on Stop. Programs in other languages use the
// HTTP API of the readpast binary instead (package httpapi).
//
// # Guarantees
//
//   - A claim hands each job to one worker at a time while its lease is
//     valid. Every claim gets a fresh token; a write with a token that is no
//     longer current (Complete, Fail, Extend, Release) changes nothing and
//     returns ErrStaleToken.
//   - A lease that expires without a heartbeat ends the claim (RunRescuer):
//     the job runs again, and the expiry counts as an attempt.
//   - Jobs are claimed by priority (lower first), then run-at, then id; a
//     job is never claimed before its run-at. On PostgreSQL a store's
//     claims of one queue start where its last one ended, so a job that
//     becomes due ahead of that point (another process enqueued it with a
//     higher priority, say) is claimed by the store's next full claim, at
//     least every second (see docs/architecture.md).
//   - Jobs sharing a concurrency group never run more at once than the
//     group's limit (1 unless Store.SetGroupLimit says otherwise), the
//     oldest first, and a busy group holds back nothing else.
//   - An enqueue can join the caller's own transaction (SQLTxStore), so
//     the job exists only if the caller's writes commit.
//
// Errors callers branch on are sentinels (ErrNotFound, ErrStaleToken,
// ErrInvalidState, ErrInvalid with a *FieldError, ErrUnavailable,
// ErrSchemaTooNew), matched with errors.Is.
package readpast
