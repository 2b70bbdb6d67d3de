// Package readpast is a durable job queue that lives in a SQL table, on
// PostgreSQL or SQLite.
//
// Producers enqueue jobs, each a kind, a JSON payload and options (queue,
// priority, run-at, max attempts, concurrency group, unique key, tags);
// workers on any number of machines claim them concurrently without
// waiting on each other, and every job's history stays queryable after it
// finishes. The package example (Example) is the quick start: a handler,
// a client that runs it, and a job.
//
// # Parts
//
// A [Store] holds the jobs. The postgres package is the server engine (any
// number of workers on any number of hosts share one PostgreSQL); the
// sqlite package is the embedded default (one file); the stores package
// opens either from a URL. Both pass the same conformance suite (package
// storetest), so what this documentation says holds on both, with the
// differences listed in docs/sqlite.md. A Store's methods are the queue's
// operations (enqueue, claim, complete, inspect, act in bulk, pause); a
// Client calls them for its workers.
//
// [Workers] maps each job kind to its handler: [Workers.Handle] takes a
// [HandlerFunc] on the raw JSON payload, [HandleTyped] decodes the payload
// into a Go type first. A handler returns a result (stored as JSON) or an
// error.
//
// A [Client] runs the handlers: [NewClient] on a Store and a [Config],
// then [Client.Start] runs a pool of workers per queue ([QueueConfig])
// that claim jobs in batches, keep each job's lease alive while its
// handler runs, write its outcome, and release unfinished jobs on
// [Client.Stop]. A Client also runs the background loops a queue needs:
// [RunRescuer] (expired leases), [RunRetention] (old finished jobs) and a
// [Scheduler] (periodic jobs). A process that runs no Client, such as
// `readpast serve`, runs these itself. An enqueue-only Client needs no
// Workers. Programs in other languages use the HTTP API of the readpast
// binary instead (package httpapi).
//
// # Features
//
// Each of these has a runnable example, on SQLite:
//
//   - Retries: a handler's error fails the attempt, and the job runs again
//     after its [RetryPolicy]'s wait until MaxAttempts; [Permanent] gives
//     up at once; a timeout ([HandlerOptions], Config.JobTimeout) or a
//     panic fails the attempt too. Example (Retries).
//   - Snooze: a handler returns [Snooze] to run its job again later
//     without counting the attempt. Example (Snooze).
//   - Transactional enqueue: an enqueue can join the caller's own
//     transaction ([SQLTxStore]), so the job exists only if the caller's
//     writes commit. Example (Transaction).
//   - Concurrency groups: jobs sharing a group never run more at once
//     than the group's limit (1 unless Store.SetGroupLimit says
//     otherwise), the oldest first, and a busy group holds back nothing
//     else. Example (Groups).
//   - Unique jobs: while a job holds its unique key, enqueueing the key
//     again creates nothing and returns the holder marked Duplicate.
//     Example (Unique).
//   - Periodic jobs: a schedule ([ScheduleParams], Config.Schedules)
//     enqueues one job per tick of a cron expression, exactly once however
//     many schedulers run, with a [CatchUp] policy for missed ticks.
//     Example (Schedules).
//   - Tags label jobs for listing and bulk actions. Example (Tags).
//   - Bulk actions retry, cancel or delete every job a [JobFilter]
//     matches. Example (Bulk).
//   - Pausing a queue stops every process's claims from taking its jobs
//     until it is resumed. Example (Pause).
//
// Finished jobs keep their attempts' errors and their result, readable
// with Store.Get, List, Stats and Queues and the [Inspector] reads a
// dashboard needs, until [Retention] (Config.Retention) deletes them.
//
// # Guarantees
//
//   - A claim hands each job to one worker at a time while its lease is
//     valid. Every claim gets a fresh token; a write with a token that is no
//     longer current (Complete, Fail, Extend, Release, Snooze) changes
//     nothing and returns ErrStaleToken.
//   - A lease that expires without a heartbeat ends the claim (RunRescuer):
//     the job runs again, and the expiry counts as an attempt.
//   - Jobs are claimed by priority (lower first), then run-at, then id; a
//     job is never claimed before its run-at. On PostgreSQL a store's
//     claims of one queue start where its last one ended, so a job that
//     becomes due ahead of that point (another process enqueued it with a
//     higher priority, say) is claimed by the store's next full claim, at
//     least every second (see docs/architecture.md).
//   - Jobs sharing a concurrency group never run more at once than the
//     group's limit, and a busy group holds back nothing else.
//   - A schedule's tick fires once, however many schedulers race for it:
//     one job per tick (missed ticks follow the schedule's CatchUp
//     policy).
//
// # Errors
//
// Errors callers branch on are sentinels (ErrNotFound, ErrStaleToken,
// ErrInvalidState, ErrInvalid with a *FieldError, ErrUnavailable,
// ErrSchemaTooNew, ErrScheduleNotFound, ErrSkipped with a *SkippedError),
// matched with errors.Is.
//
// # Writing a store
//
// A store implements [Store], and may implement [Notifier] (wake claimers
// at once), [SQLTxStore], [Inspector], [Tidier], [GroupPruner] and
// [SchemaVersioner]. It validates its input with the Normalize methods of
// the params types and the Check functions (CheckQueue, CheckLease, ...),
// and must pass the conformance suite of package storetest.
package readpast
