package sqlite

// The store's SQL. Every statement is a constant; values are always bound
// as parameters. Lists of ids, queues and per-group counts are bound as one
// JSON text parameter and read with json_each, so no statement's text ever
// depends on user input. The only statement assembled at run time is the
// multi-row INSERT of Enqueue, which repeats enqueueRowSQL a number of times.

// jobColumns are the columns the live and history tables share, in the
// order scanJob reads them (followed by finished_at and result).
const jobColumns = `id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
    lease_expires_at, worker, group_key, created_at, started_at, errors`

// liveSelect and historySelect read one job from either table with the
// same 18 columns.
const (
	liveSelect    = jobColumns + `, NULL AS finished_at, NULL AS result`
	historySelect = jobColumns + `, finished_at, result`
)

// Enqueue.
const (
	enqueueInsertSQL = `INSERT INTO readpast_jobs
    (queue, kind, payload, priority, run_at, state, max_attempts, group_key, created_at)
VALUES `
	// enqueueRowSQL is one row of enqueueInsertSQL; enqueueRowParams counts its ?s.
	enqueueRowSQL       = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?)`
	enqueueRowParams    = 8
	enqueueReturningSQL = ` RETURNING id`
	// enqueueChunk rows per INSERT keeps each statement far below SQLite's
	// limit of 32766 bound parameters.
	enqueueChunk = 1000
)

// Claim and ready marks (migrations/0003_ready_marks.sql).
const (
	// claimProbeSQL runs on the read pool: is there anything a claim of
	// the queues in ?1 (a JSON array) that are not paused would look at: a
	// due pending ungrouped job, or a due ready mark? It lets an idle
	// poller skip the write lock.
	claimProbeSQL = `WITH open(name) AS (
    SELECT value FROM json_each(?1)
    WHERE value NOT IN (SELECT name FROM readpast_queues WHERE paused_at IS NOT NULL))
SELECT EXISTS (
    SELECT 1 FROM readpast_jobs
    WHERE queue IN (SELECT name FROM open) AND state = 'pending' AND group_key IS NULL AND run_at <= ?2)
  OR EXISTS (
    SELECT 1 FROM readpast_group_ready
    WHERE queue IN (SELECT name FROM open) AND run_at <= ?2)`
	// pausedAmongSQL lists the queues of ?1 (a JSON array) that are
	// paused: a claim leaves them out.
	pausedAmongSQL = `SELECT name FROM readpast_queues
WHERE paused_at IS NOT NULL AND name IN (SELECT value FROM json_each(?1))`
	// pauseQueueSQL pauses queue ?1 at ?2, keeping the time of a pause
	// already in force; resumeQueueSQL resumes it.
	pauseQueueSQL = `INSERT INTO readpast_queues (name, paused_at) VALUES (?1, ?2)
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(paused_at, excluded.paused_at)`
	resumeQueueSQL  = `UPDATE readpast_queues SET paused_at = NULL WHERE name = ?1 AND paused_at IS NOT NULL`
	pausedQueuesSQL = `SELECT name, paused_at FROM readpast_queues WHERE paused_at IS NOT NULL`
	// ungroupedSQL lists the first ?3 due pending ungrouped jobs of queue
	// ?1 in claim order.
	ungroupedSQL = `SELECT id, queue, priority, run_at, group_key FROM readpast_jobs
WHERE queue = ?1 AND state = 'pending' AND group_key IS NULL AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3`
	// markedGroupsSQL lists the groups named by the first ?3 due ready
	// marks of queue ?1, in claim order.
	markedGroupsSQL = `SELECT group_key FROM readpast_group_ready
WHERE queue = ?1 AND run_at <= ?2
ORDER BY priority, run_at, job_id
LIMIT ?3`
	// groupFreeSQL reads a group's free slots; no row means 1.
	groupFreeSQL = `SELECT max_running - running FROM readpast_groups WHERE group_key = ?1`
	// groupHeadSQL lists the first ?3 due pending jobs of group ?1 across
	// all queues: the only jobs of the group a claim may take.
	groupHeadSQL = `SELECT id, queue, priority, run_at, group_key FROM readpast_jobs
WHERE group_key = ?1 AND state = 'pending' AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3`
	// dropDueMarksSQL uses up the due marks of the groups in ?1 (a JSON
	// array). Marks of jobs not yet due stay: nobody else would mark those
	// jobs when they come due.
	dropDueMarksSQL = `DELETE FROM readpast_group_ready
WHERE group_key IN (SELECT value FROM json_each(?1)) AND run_at <= ?2`
	// insertMarksSQL adds the marks in ?1, a JSON array of
	// [queue, priority, run_at, job_id, group_key].
	insertMarksSQL = `INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4 FROM json_each(?1)`
	// markJobsSQL marks each pending grouped job of ?1 (a JSON array of
	// ids) at its place in claim order.
	markJobsSQL = `INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT queue, priority, run_at, id, group_key FROM readpast_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND group_key IS NOT NULL AND state = 'pending'`
	// claimUpdateSQL takes the chosen jobs (?1: JSON array of ids) under
	// the claim's token ?5.
	claimUpdateSQL = `UPDATE readpast_jobs
SET state = 'running', attempt = attempt + 1, token = ?5,
    worker = ?2, started_at = ?3, lease_expires_at = ?4
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
RETURNING ` + liveSelect
	// groupAddSQL adds ?1 (JSON object group -> jobs claimed) to running.
	groupAddSQL = `INSERT INTO readpast_groups (group_key, running)
SELECT key, value FROM json_each(?1) WHERE true
ON CONFLICT (group_key) DO UPDATE SET running = running + excluded.running`
	// groupSubSQL takes ?1 (JSON object group -> jobs that stopped running)
	// off running; groupForgetSQL then drops rows back at the defaults.
	// Nothing clamps the count: taking off more than a group has running
	// breaks the schema's CHECK (running >= 0) and fails the transaction,
	// and releaseGroups checks that every group had a row, so a drift in
	// the counters is an error, never silently absorbed.
	groupSubSQL = `UPDATE readpast_groups
SET running = running - (SELECT d.value FROM json_each(?1) AS d WHERE d.key = readpast_groups.group_key)
WHERE group_key IN (SELECT key FROM json_each(?1))`
	groupForgetSQL = `DELETE FROM readpast_groups
WHERE running = 0 AND max_running = 1 AND group_key IN (SELECT key FROM json_each(?1))`
	setGroupLimitSQL = `INSERT INTO readpast_groups (group_key, max_running) VALUES (?1, ?2)
ON CONFLICT (group_key) DO UPDATE SET max_running = excluded.max_running`
)

// Worker writes. Each matches id, token and state = 'running'.
const (
	// completeMoveSQL copies the running jobs that ?1 names with their
	// current token (a JSON array of [id, token, result-text-or-null]) into
	// history as succeeded at ?2; deleteLiveManySQL then removes them from
	// the live table. The result travels as a JSON string, so its text is
	// kept byte for byte.
	completeMoveSQL = `INSERT INTO readpast_history (` + jobColumns + `, finished_at, result)
SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, 'succeeded', j.attempt, j.max_attempts, j.token,
    NULL, j.worker, j.group_key, j.created_at, j.started_at, j.errors, ?2, c.value ->> 2
FROM json_each(?1) AS c
JOIN readpast_jobs AS j ON j.id = c.value ->> 0 AND j.token = c.value ->> 1 AND j.state = 'running'
RETURNING id, token, group_key`
	deleteLiveManySQL = `DELETE FROM readpast_jobs WHERE id IN (SELECT value FROM json_each(?1))`
	deleteLiveSQL     = `DELETE FROM readpast_jobs WHERE id = ?1`
	// moveToHistorySQL moves job ?1 (already checked by the caller, in the
	// same transaction) to history in state ?2 with errors ?3 (NULL keeps
	// them) at ?4.
	moveToHistorySQL = `INSERT INTO readpast_history (` + jobColumns + `, finished_at, result)
SELECT id, queue, kind, payload, priority, run_at, ?2, attempt, max_attempts, token,
    NULL, worker, group_key, created_at, started_at, coalesce(?3, errors), ?4, NULL
FROM readpast_jobs WHERE id = ?1`
	// runningJobSQL reads what Fail and RescueExpired need of a held job.
	runningJobSQL = `SELECT attempt, max_attempts, errors, coalesce(worker, ''), group_key
FROM readpast_jobs WHERE id = ?1 AND token = ?2 AND state = 'running'`
	// requeueSQL puts a running job back to pending with errors ?4, at
	// run_at ?3, or (NULL) at its old run_at: its place in claim order.
	requeueSQL = `UPDATE readpast_jobs
SET state = 'pending', run_at = coalesce(?3, run_at), token = NULL, lease_expires_at = NULL, errors = ?4
WHERE id = ?1 AND token = ?2 AND state = 'running'`
	extendSQL = `UPDATE readpast_jobs SET lease_expires_at = ?3
WHERE id = ?1 AND token = ?2 AND state = 'running'`
	// releaseSQL gives a running job back with its attempt uncounted; it
	// keeps its run_at, so its place in claim order. A running job's
	// attempt is at least 1; the attempt check trigger (migration 2) turns
	// a drift below 0 into an error instead of a clamp hiding it.
	releaseSQL = `UPDATE readpast_jobs
SET state = 'pending', attempt = attempt - 1, token = NULL, lease_expires_at = NULL
WHERE id = ?1 AND token = ?2 AND state = 'running'
RETURNING group_key`
	// lookupSQL finds a job's state and token in either table, to explain
	// why a worker's write matched nothing.
	lookupSQL = `SELECT state, coalesce(token, '') FROM readpast_jobs WHERE id = ?1
UNION ALL
SELECT state, coalesce(token, '') FROM readpast_history WHERE id = ?1`
)

// Cancel and Retry.
const (
	liveStateSQL    = `SELECT state, group_key FROM readpast_jobs WHERE id = ?1`
	historyStateSQL = `SELECT state FROM readpast_history WHERE id = ?1`
	runNowSQL       = `UPDATE readpast_jobs SET run_at = ?2 WHERE id = ?1`
	restoreSQL      = `INSERT INTO readpast_jobs (` + jobColumns + `)
SELECT id, queue, kind, payload, priority, ?2, 'pending', 0, max_attempts, NULL,
    NULL, worker, group_key, created_at, started_at, errors
FROM readpast_history WHERE id = ?1`
	deleteHistorySQL = `DELETE FROM readpast_history WHERE id = ?1`
	getLiveSQL       = `SELECT ` + liveSelect + ` FROM readpast_jobs WHERE id = ?1`
	getHistorySQL    = `SELECT ` + historySelect + ` FROM readpast_history WHERE id = ?1`
)

// Reads.
const (
	getSQL = `SELECT ` + liveSelect + ` FROM readpast_jobs WHERE id = ?1
UNION ALL
SELECT ` + historySelect + ` FROM readpast_history WHERE id = ?1`
	// listSQL: ?1 id bound (exclusive), ?2 queue, ?3 state, ?4 kind,
	// ?5 group ('' = any), ?6 limit. Each arm skips itself when the state
	// filter names a state its table cannot hold.
	listSQL = `SELECT ` + liveSelect + ` FROM readpast_jobs
WHERE id < ?1 AND (?2 = '' OR queue = ?2) AND (?4 = '' OR kind = ?4) AND (?5 = '' OR group_key = ?5)
  AND (?3 = '' OR (?3 IN ('pending', 'running') AND state = ?3))
UNION ALL
SELECT ` + historySelect + ` FROM readpast_history
WHERE id < ?1 AND (?2 = '' OR queue = ?2) AND (?4 = '' OR kind = ?4) AND (?5 = '' OR group_key = ?5)
  AND (?3 = '' OR (?3 IN ('succeeded', 'failed', 'cancelled') AND state = ?3))
ORDER BY id DESC
LIMIT ?6`
	// statsSQL reads the counts the triggers of migration 5 keep.
	statsSQL = `SELECT queue, state, n FROM readpast_counts WHERE n <> 0`
)

// Maintenance.
const (
	rescueProbeSQL = `SELECT EXISTS (
    SELECT 1 FROM readpast_jobs WHERE state = 'running' AND lease_expires_at <= ?1)`
	rescueFetchSQL = `SELECT id, token, attempt, max_attempts, errors, coalesce(worker, ''), group_key
FROM readpast_jobs
WHERE state = 'running' AND lease_expires_at <= ?1
ORDER BY lease_expires_at, id
LIMIT ?2`
	pruneSQL = `DELETE FROM readpast_history WHERE id IN (
    SELECT id FROM readpast_history WHERE state = ?1 AND finished_at < ?2 LIMIT ?3)`
)
