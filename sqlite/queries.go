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

// Claim.
const (
	// claimProbeSQL runs on the read pool: is any job claimable (pending,
	// due, and ungrouped or in a group with a free slot)? It lets an idle
	// poller skip the write lock.
	claimProbeSQL = `SELECT EXISTS (
    SELECT 1 FROM readpast_jobs AS j
    LEFT JOIN readpast_groups AS g ON g.group_key = j.group_key
    WHERE j.queue IN (SELECT value FROM json_each(?1)) AND j.state = 'pending' AND j.run_at <= ?2
      AND (g.group_key IS NULL OR g.running < g.max_running))`
	// claimScanSQL walks one queue's due pending jobs in claim order after
	// the key (?3, ?4, ?5), on readpast_jobs_claim, with each job's group
	// counts. It passes over groups that were full when the transaction
	// began and those in ?6 (a JSON array of groups this claim has filled
	// or found blocked by an older job in another queue).
	// The caller reads only as far as it needs.
	claimScanSQL = `SELECT j.id, j.priority, j.run_at, j.group_key,
    coalesce(g.running, 0), coalesce(g.max_running, 1)
FROM readpast_jobs AS j
LEFT JOIN readpast_groups AS g ON g.group_key = j.group_key
WHERE j.queue = ?1 AND j.state = 'pending' AND j.run_at <= ?2
  AND (j.priority, j.run_at, j.id) > (?3, ?4, ?5)
  AND (j.group_key IS NULL OR (coalesce(g.running, 0) < coalesce(g.max_running, 1)
       AND j.group_key NOT IN (SELECT value FROM json_each(?6))))
ORDER BY j.priority, j.run_at, j.id`
	// groupHeadSQL lists the first ?3 due pending jobs of group ?1 across
	// all queues: the only jobs of the group a claim may take.
	groupHeadSQL = `SELECT id FROM readpast_jobs
WHERE group_key = ?1 AND state = 'pending' AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3`
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
	statsSQL = `SELECT queue, state, count(*) FROM readpast_jobs GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*) FROM readpast_history GROUP BY queue, state`
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
