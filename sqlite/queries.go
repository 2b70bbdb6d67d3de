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
// same 23 columns: the job's keys after the first (more_keys, a JSON
// array; NULL for one key or none) come last.
const (
	liveSelect    = jobColumns + `, NULL AS finished_at, NULL AS result, unique_key, unique_until, tags, snoozes, more_keys`
	historySelect = jobColumns + `, finished_at, result, unique_key, unique_until, tags, snoozes, more_keys`
)

// Enqueue.
const (
	enqueueInsertSQL = `INSERT INTO readpast_jobs
    (queue, kind, payload, priority, run_at, state, max_attempts, group_key, created_at, unique_key, unique_until, tags)
VALUES `
	// enqueueRowSQL is one row of enqueueInsertSQL; enqueueRowParams counts its ?s.
	enqueueRowSQL    = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)`
	enqueueRowParams = 11
	// enqueueTracedInsertSQL and enqueueTracedRowSQL are the INSERT of a
	// batch in which a job has a creation context (traceparent,
	// tracestate): two more parameters a row.
	enqueueTracedInsertSQL = `INSERT INTO readpast_jobs
    (queue, kind, payload, priority, run_at, state, max_attempts, group_key, created_at, unique_key, unique_until, tags,
     traceparent, tracestate)
VALUES `
	enqueueTracedRowSQL = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)`
	// enqueueKeyedInsertSQL and enqueueKeyedRowSQL are the traced INSERT
	// of a batch in which a job has more than one key: its keys after the
	// first (more_keys, a JSON array, NULL for none) one more parameter a
	// row. A batch of jobs with one key or none never sends it.
	enqueueKeyedInsertSQL = `INSERT INTO readpast_jobs
    (queue, kind, payload, priority, run_at, state, max_attempts, group_key, created_at, unique_key, unique_until, tags,
     traceparent, tracestate, more_keys)
VALUES `
	enqueueKeyedRowSQL = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// enqueueFlowInsertSQL and enqueueFlowRowSQL are the INSERT of a
	// flow's jobs: the traced row's parameters, then more_keys, state,
	// waiting_on and has_children.
	enqueueFlowInsertSQL = `INSERT INTO readpast_jobs
    (queue, kind, payload, priority, run_at, max_attempts, group_key, created_at, unique_key, unique_until, tags,
     traceparent, tracestate, more_keys, state, waiting_on, has_children)
VALUES `
	enqueueFlowRowSQL   = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	enqueueReturningSQL = ` RETURNING id`
	// enqueueChunk rows per INSERT keeps each statement far below SQLite's
	// limit of 32766 bound parameters.
	enqueueChunk = 1000
	// insertTagsSQL writes the tag rows of a batch: ?1 is a JSON array of
	// [tag, job id].
	insertTagsSQL = `INSERT INTO readpast_job_tags (tag, job_id)
SELECT value ->> 0, value ->> 1 FROM json_each(?1)`
	// dropTagsSQL deletes the tag rows of ?1, a JSON array of [tag, job
	// id] of deleted jobs.
	dropTagsSQL = `DELETE FROM readpast_job_tags
WHERE (tag, job_id) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1))`
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
	// ?1 in claim order (in queryCandidates' columns: a job without keys
	// has no more_keys).
	ungroupedSQL = `SELECT id, queue, priority, run_at, group_key, NULL FROM readpast_jobs
WHERE queue = ?1 AND state = 'pending' AND group_key IS NULL AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3`
	// markedGroupsSQL lists the groups named by the due ready marks of
	// queue ?1, in claim order, a group once for each of its marks, with
	// whether it has a due pending job at ?2 (not when the mark is of a
	// job since cancelled) and its row's slots and bucket (NULL without a
	// row). The claim reads as many as it needs.
	markedGroupsSQL = `SELECT m.group_key,
  EXISTS (SELECT 1 FROM readpast_jobs j WHERE j.group_key = m.group_key AND j.state = 'pending' AND j.run_at <= ?2),
  g.running, g.max_running, g.interval_us, g.burst, g.tat
FROM readpast_group_ready m
LEFT JOIN readpast_groups g ON g.group_key = m.group_key
WHERE m.queue = ?1 AND m.run_at <= ?2
ORDER BY m.priority, m.run_at, m.job_id`
	// groupHeadSQL lists the first ?3 due pending jobs of group ?1 across
	// all queues, with their later keys: the only jobs of the group a
	// claim may take.
	groupHeadSQL = `SELECT id, queue, priority, run_at, group_key, more_keys FROM readpast_jobs
WHERE group_key = ?1 AND state = 'pending' AND run_at <= ?2
ORDER BY priority, run_at, id
LIMIT ?3`
	// dropDueMarksSQL uses up the due marks of the groups in ?1 (a JSON
	// array). Marks of jobs not yet due stay: nobody else would mark those
	// jobs when they come due.
	dropDueMarksSQL = `DELETE FROM readpast_group_ready
WHERE group_key IN (SELECT value FROM json_each(?1)) AND run_at <= ?2`
	// insertMarksSQL adds the marks in ?1, a JSON array of
	// [queue, priority, run_at, job_id, group_key], each at its key's
	// turn: the later of run_at and the key's served_at.
	insertMarksSQL = `INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT value ->> 0, value ->> 1, max(value ->> 2, coalesce((SELECT served_at FROM readpast_groups g WHERE g.group_key = value ->> 4), 0)), value ->> 3, value ->> 4 FROM json_each(?1)`
	// markJobsSQL marks each pending grouped job of ?1 (a JSON array of
	// ids) at its place in claim order: its key's turn.
	markJobsSQL = `INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT queue, priority, max(run_at, coalesce((SELECT served_at FROM readpast_groups g WHERE g.group_key = readpast_jobs.group_key), 0)), id, group_key FROM readpast_jobs
WHERE id IN (SELECT value FROM json_each(?1)) AND group_key IS NOT NULL AND state = 'pending'`
	// claimUpdateSQL takes the chosen jobs (?1: JSON array of ids) under
	// the claim's token ?5.
	claimUpdateSQL = `UPDATE readpast_jobs
SET state = 'running', attempt = attempt + 1, token = ?5,
    worker = ?2, started_at = ?3, lease_expires_at = ?4
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'pending'
RETURNING ` + liveSelect + `, traceparent, tracestate`
	// groupSubSQL takes ?1 (JSON object group -> jobs that stopped running)
	// off running, returning each row's waiters (untouched: the first keys
	// to mark now, keys.go); groupForgetSQL then drops the rows of keys
	// left idle.
	// Nothing clamps the count: taking off more than a group has running
	// breaks the schema's CHECK (running >= 0) and fails the transaction,
	// and releaseGroups checks that every group had a row, so a drift in
	// the counters is an error, never silently absorbed.
	groupSubSQL = `UPDATE readpast_groups
SET running = running - (SELECT d.value FROM json_each(?1) AS d WHERE d.key = readpast_groups.group_key)
WHERE group_key IN (SELECT key FROM json_each(?1))
RETURNING group_key, waiters`
	// A row is forgotten once nothing runs and its bucket is full (tat
	// past ?2): what a missing row means. Declared limits stay in
	// readpast_limits; a claim that creates the row again resolves them.
	// A row whose bucket is not full yet stays for PruneGroups, and so
	// does the turn (served_at) of a key with a job waiting that is due
	// before it (a job due later takes its place at its run_at anyway),
	// and the count of jobs taken in the turn (turn_used) of a key with a
	// job waiting: a row created again would start the turn over. It
	// returns the rows' max_running, their free slots now.
	groupForgetSQL = `DELETE FROM readpast_groups
WHERE running = 0 AND (tat IS NULL OR tat <= ?2)
  AND (turn_used = 0 OR NOT EXISTS (SELECT 1 FROM readpast_jobs j
    WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending'))
  AND (served_at IS NULL OR NOT EXISTS (SELECT 1 FROM readpast_jobs j
    WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending' AND j.run_at < readpast_groups.served_at))
  AND group_key IN (SELECT key FROM json_each(?1))
RETURNING group_key, max_running`
)

// Worker writes. Each matches id, token and state = 'running'.
const (
	// completeMoveSQL copies the running jobs that ?1 names with their
	// current token (a JSON array of [id, token, result-text-or-null]) into
	// history as succeeded at ?2; deleteLiveManySQL then removes them from
	// the live table. The result travels as a JSON string, so its text is
	// kept byte for byte.
	completeMoveSQL = `INSERT INTO readpast_history (` + jobColumns + `, finished_at, result, unique_key, unique_until, tags, snoozes,
    more_keys)
SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, 'succeeded', j.attempt, j.max_attempts, j.token,
    NULL, j.worker, j.group_key, j.created_at, j.started_at, j.errors, ?2, c.value ->> 2, j.unique_key, j.unique_until,
    j.tags, j.snoozes, j.more_keys
FROM json_each(?1) AS c
JOIN readpast_jobs AS j ON j.id = c.value ->> 0 AND j.token = c.value ->> 1 AND j.state = 'running'
RETURNING id, token, group_key, more_keys, unique_key IS NOT NULL`
	// deleteLiveManySQL and deleteLiveSQL return whether each deleted row
	// was a parent (has_children): its delete resolved edges
	// (migrations/0013_flows.sql), which may have made children pending.
	deleteLiveManySQL = `DELETE FROM readpast_jobs WHERE id IN (SELECT value FROM json_each(?1)) RETURNING has_children`
	deleteLiveSQL     = `DELETE FROM readpast_jobs WHERE id = ?1 RETURNING has_children`
	// moveToHistorySQL moves job ?1 (already checked by the caller, in the
	// same transaction) to history in state ?2 with errors ?3 (NULL keeps
	// them) at ?4.
	moveToHistorySQL = `INSERT INTO readpast_history (` + jobColumns + `, finished_at, result, unique_key, unique_until, tags, snoozes,
    more_keys)
SELECT id, queue, kind, payload, priority, run_at, ?2, attempt, max_attempts, token,
    NULL, worker, group_key, created_at, started_at, coalesce(?3, errors), ?4, NULL, unique_key, unique_until,
    tags, snoozes, more_keys
FROM readpast_jobs WHERE id = ?1
RETURNING unique_key IS NOT NULL`
	// runningJobSQL reads what Fail needs of a held job: its keys too,
	// whose slots it frees.
	runningJobSQL = `SELECT attempt, max_attempts, errors, coalesce(worker, ''), group_key, more_keys
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
RETURNING group_key, more_keys`
	// snoozeSQL is releaseSQL that also moves run_at to ?3 and counts the
	// snooze.
	snoozeSQL = `UPDATE readpast_jobs
SET state = 'pending', attempt = attempt - 1, token = NULL, lease_expires_at = NULL,
    run_at = ?3, snoozes = snoozes + 1
WHERE id = ?1 AND token = ?2 AND state = 'running'
RETURNING group_key, more_keys`
	// lookupSQL finds a job's state and token in either table, to explain
	// why a worker's write matched nothing.
	lookupSQL = `SELECT state, coalesce(token, '') FROM readpast_jobs WHERE id = ?1
UNION ALL
SELECT state, coalesce(token, '') FROM readpast_history WHERE id = ?1`
)

// Cancel and Retry.
const (
	liveStateSQL = `SELECT state, group_key FROM readpast_jobs WHERE id = ?1`
	// cancelStateSQL is liveStateSQL with the job's later keys, whose
	// slots a running job's cancellation frees, and its claim token, which
	// CancelClaimed checks.
	cancelStateSQL  = `SELECT state, group_key, more_keys, coalesce(token, '') FROM readpast_jobs WHERE id = ?1`
	historyStateSQL = `SELECT state FROM readpast_history WHERE id = ?1`
	runNowSQL       = `UPDATE readpast_jobs SET run_at = ?2 WHERE id = ?1`
	// restoreSQL brings finished job ?1 back as pending at ?2; a parent
	// that still holds a child (a held edge) is a parent again, so that
	// its success releases the child.
	restoreSQL = `INSERT INTO readpast_jobs (` + jobColumns + `, unique_key, unique_until, tags, snoozes, more_keys, has_children)
SELECT id, queue, kind, payload, priority, ?2, 'pending', 0, max_attempts, NULL,
    NULL, worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, 0, more_keys,
    EXISTS (SELECT 1 FROM readpast_edges e WHERE e.parent_id = ?1 AND e.state <> 'done')
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
  AND (?3 = '' OR (?3 IN ('blocked', 'pending', 'running') AND state = ?3))
UNION ALL
SELECT ` + historySelect + ` FROM readpast_history
WHERE id < ?1 AND (?2 = '' OR queue = ?2) AND (?4 = '' OR kind = ?4) AND (?5 = '' OR group_key = ?5)
  AND (?3 = '' OR (?3 IN ('succeeded', 'failed', 'cancelled') AND state = ?3))
ORDER BY id DESC
LIMIT ?6`
	// listTagSQL is listSQL for the jobs carrying tag ?7: each arm walks
	// the primary key of readpast_job_tags backwards from ?1, with one
	// primary-key lookup per tag row, and the arms merge in id order.
	listTagSQL = `SELECT ` + liveSelect + ` FROM readpast_job_tags t JOIN readpast_jobs ON id = t.job_id
WHERE t.tag = ?7 AND t.job_id < ?1 AND (?2 = '' OR queue = ?2) AND (?4 = '' OR kind = ?4)
  AND (?5 = '' OR group_key = ?5) AND (?3 = '' OR (?3 IN ('blocked', 'pending', 'running') AND state = ?3))
UNION ALL
SELECT ` + historySelect + ` FROM readpast_job_tags t JOIN readpast_history ON id = t.job_id
WHERE t.tag = ?7 AND t.job_id < ?1 AND (?2 = '' OR queue = ?2) AND (?4 = '' OR kind = ?4)
  AND (?5 = '' OR group_key = ?5) AND (?3 = '' OR (?3 IN ('succeeded', 'failed', 'cancelled') AND state = ?3))
ORDER BY id DESC
LIMIT ?6`
	// statsSQL reads the counts the triggers of migration 5 keep.
	statsSQL = `SELECT queue, state, n FROM readpast_counts WHERE n <> 0`
)

// Maintenance.
const (
	rescueProbeSQL = `SELECT EXISTS (
    SELECT 1 FROM readpast_jobs WHERE state = 'running' AND lease_expires_at <= ?1)`
	rescueFetchSQL = `SELECT id, token, attempt, max_attempts, errors, coalesce(worker, ''), group_key, more_keys
FROM readpast_jobs
WHERE state = 'running' AND lease_expires_at <= ?1
ORDER BY lease_expires_at, id
LIMIT ?2`
	// pruneSQL leaves every job an edge names to PruneFlows, which
	// deletes a flow's jobs together.
	pruneSQL = `DELETE FROM readpast_history WHERE id IN (
    SELECT id FROM readpast_history WHERE state = ?1 AND finished_at < ?2
      AND (unique_until IS NULL OR unique_until <= ?4)
      AND NOT EXISTS (SELECT 1 FROM readpast_edges e WHERE e.parent_id = readpast_history.id)
      AND NOT EXISTS (SELECT 1 FROM readpast_edges e WHERE e.child_id = readpast_history.id)
    LIMIT ?3)
RETURNING id, unique_key, tags`
)

// Unique keys (migrations/0005_unique_and_schedules.sql). A key is held
// while its row is live or its keep_until has not passed.
const (
	// takeKeySQL inserts key ?1 for job ?2 with period end ?3 (NULL for
	// none); it changes nothing when the key has a row (the primary key
	// decides).
	takeKeySQL = `INSERT INTO readpast_unique_keys (unique_key, job_id, live, keep_until) VALUES (?1, ?2, 1, ?3)
ON CONFLICT (unique_key) DO NOTHING`
	// retakeKeySQL is takeKeySQL for a retried job ?2: it also takes over
	// the key's row when that is the job's own, or no longer holds the key
	// at ?4.
	retakeKeySQL = `INSERT INTO readpast_unique_keys (unique_key, job_id, live, keep_until) VALUES (?1, ?2, 1, ?3)
ON CONFLICT (unique_key) DO UPDATE SET job_id = excluded.job_id, live = 1, keep_until = excluded.keep_until
WHERE readpast_unique_keys.job_id = excluded.job_id
   OR (NOT readpast_unique_keys.live AND readpast_unique_keys.keep_until <= ?4)`
	// historyKeySQL reads the unique key of finished job ?1.
	historyKeySQL = `SELECT unique_key, unique_until FROM readpast_history WHERE id = ?1`
	// keyHolderSQL reads the row of key ?1.
	keyHolderSQL = `SELECT job_id, live, coalesce(keep_until, 0) FROM readpast_unique_keys WHERE unique_key = ?1`
	// replaceKeySQL gives key ?1, whose row no longer holds it, to job ?2.
	replaceKeySQL = `UPDATE readpast_unique_keys SET job_id = ?2, live = 1, keep_until = ?3 WHERE unique_key = ?1`
	// setKeyJobSQL points key ?1 at its new job ?2.
	setKeyJobSQL = `UPDATE readpast_unique_keys SET job_id = ?2 WHERE unique_key = ?1`
	// releaseKeysSQL and keepKeysSQL free the keys held by the finished
	// jobs of ?1 (a JSON array of ids, already in history): a key without
	// a period, or whose period ended by ?2, is deleted; one in its period
	// stays held, no longer live, until keep_until.
	releaseKeysSQL = `DELETE FROM readpast_unique_keys
WHERE (unique_key, job_id) IN (
    SELECT unique_key, id FROM readpast_history
    WHERE id IN (SELECT value FROM json_each(?1)) AND unique_key IS NOT NULL)
  AND (keep_until IS NULL OR keep_until <= ?2)`
	keepKeysSQL = `UPDATE readpast_unique_keys SET live = 0
WHERE (unique_key, job_id) IN (
    SELECT unique_key, id FROM readpast_history
    WHERE id IN (SELECT value FROM json_each(?1)) AND unique_key IS NOT NULL)`
	// dropKeysSQL deletes the rows of ?1, a JSON array of [key, job id]
	// of jobs retention deleted.
	dropKeysSQL = `DELETE FROM readpast_unique_keys
WHERE (unique_key, job_id) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1))`
)

// Schedules.
const (
	scheduleColumns = `name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
    group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at`
	// scheduleExistsSQL: whether schedule ?1 exists, and its last fired tick.
	scheduleExistsSQL = `SELECT count(*), max(last_run_at) FROM readpast_schedules WHERE name = ?1`
	// scheduleLastRunSQL reads the last fired tick of schedule ?1.
	scheduleLastRunSQL = `SELECT last_run_at FROM readpast_schedules WHERE name = ?1`
	scheduleGetSQL     = `SELECT ` + scheduleColumns + ` FROM readpast_schedules WHERE name = ?1`
	scheduleListSQL    = `SELECT ` + scheduleColumns + ` FROM readpast_schedules ORDER BY name`
	scheduleDueSQL     = `SELECT ` + scheduleColumns + ` FROM readpast_schedules
WHERE NOT paused AND next_run_at <= ?1 ORDER BY next_run_at LIMIT ?2`
	// schedulePutSQL: see postgres/sql/schedule_put.sql. ?5 paused: NULL
	// keeps; ?12 the first tick after now; ?13 now.
	schedulePutSQL = `INSERT INTO readpast_schedules AS s
    (name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
     group_key, next_run_at, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, coalesce(?5, 0), ?6, ?7, ?8, ?9, ?10, ?11,
        CASE WHEN coalesce(?5, 0) THEN NULL ELSE ?12 END, ?13, ?13)
ON CONFLICT (name) DO UPDATE SET
    cron = excluded.cron, time_zone = excluded.time_zone, catch_up = excluded.catch_up,
    paused = coalesce(?5, s.paused),
    queue = excluded.queue, kind = excluded.kind, payload = excluded.payload,
    priority = excluded.priority, max_attempts = excluded.max_attempts, group_key = excluded.group_key,
    next_run_at = CASE
        WHEN coalesce(?5, s.paused) THEN NULL
        WHEN NOT s.paused AND s.cron = excluded.cron AND s.time_zone = excluded.time_zone THEN s.next_run_at
        ELSE ?12
    END,
    version = s.version + 1, updated_at = ?13`
	schedulePauseSQL = `UPDATE readpast_schedules
SET paused = 1, next_run_at = NULL, version = version + 1, updated_at = ?2 WHERE name = ?1`
	scheduleResumeSQL = `UPDATE readpast_schedules
SET paused = 0, next_run_at = ?3, version = version + 1, updated_at = ?4 WHERE name = ?1 AND version = ?2`
	scheduleDeleteSQL     = `DELETE FROM readpast_schedules WHERE name = ?1`
	scheduleDeleteRunsSQL = `DELETE FROM readpast_schedule_runs WHERE schedule = ?1`
	scheduleRunsSQL       = `SELECT tick, job_id, catch_up, created_at FROM readpast_schedule_runs
WHERE schedule = ?1 ORDER BY tick DESC LIMIT ?2`
	// scheduleFireSQL is the conditional update that fires a tick: it
	// matches only if schedule ?1 is still at version ?2, running, with its
	// next tick at ?3. It moves the next tick to ?5 and records tick ?4
	// (NULL: skipped) and job ?6.
	scheduleFireSQL = `UPDATE readpast_schedules
SET next_run_at = ?5, last_run_at = coalesce(?4, last_run_at), last_job_id = coalesce(?6, last_job_id)
WHERE name = ?1 AND version = ?2 AND NOT paused AND next_run_at = ?3
RETURNING queue, kind, payload, priority, max_attempts, group_key`
	setLastJobSQL  = `UPDATE readpast_schedules SET last_job_id = ?2 WHERE name = ?1`
	scheduleRunSQL = `INSERT INTO readpast_schedule_runs (schedule, tick, job_id, catch_up, created_at)
VALUES (?1, ?2, ?3, ?4, ?5)`
	// scheduleTrimRunsSQL keeps the latest 100 runs of schedule ?1.
	scheduleTrimRunsSQL = `DELETE FROM readpast_schedule_runs WHERE schedule = ?1 AND tick < (
    SELECT tick FROM readpast_schedule_runs WHERE schedule = ?1 ORDER BY tick DESC LIMIT 1 OFFSET 99)`
)

// Bulk actions and Delete. The walks (bulk*IDsSQL) list the next ?7 ids
// past ?1 that match queue ?2, kind ?3, state ?4 and group ?5 (” = any),
// by primary key; the tag walks (?6 the tag) go through the primary key
// of readpast_job_tags instead.
const (
	bulkLiveIDsSQL = `SELECT id FROM readpast_jobs
WHERE id > ?1 AND (?2 = '' OR queue = ?2) AND (?3 = '' OR kind = ?3) AND (?4 = '' OR state = ?4)
  AND (?5 = '' OR group_key = ?5)
ORDER BY id LIMIT ?7`
	bulkLiveTagIDsSQL = `SELECT t.job_id FROM readpast_job_tags t JOIN readpast_jobs j ON j.id = t.job_id
WHERE t.tag = ?6 AND t.job_id > ?1
  AND (?2 = '' OR j.queue = ?2) AND (?3 = '' OR j.kind = ?3) AND (?4 = '' OR j.state = ?4)
  AND (?5 = '' OR j.group_key = ?5)
ORDER BY t.job_id LIMIT ?7`
	bulkHistoryIDsSQL = `SELECT id, state FROM readpast_history
WHERE id > ?1 AND (?2 = '' OR queue = ?2) AND (?3 = '' OR kind = ?3) AND (?4 = '' OR state = ?4)
  AND (?5 = '' OR group_key = ?5)
ORDER BY id LIMIT ?7`
	bulkHistoryTagIDsSQL = `SELECT t.job_id, h.state FROM readpast_job_tags t JOIN readpast_history h ON h.id = t.job_id
WHERE t.tag = ?6 AND t.job_id > ?1
  AND (?2 = '' OR h.queue = ?2) AND (?3 = '' OR h.kind = ?3) AND (?4 = '' OR h.state = ?4)
  AND (?5 = '' OR h.group_key = ?5)
ORDER BY t.job_id LIMIT ?7`
	// deleteFinishedSQL deletes history row ?1 and returns what must go
	// with it.
	deleteFinishedSQL = `DELETE FROM readpast_history WHERE id = ?1 RETURNING unique_key, tags`
	// heldChildSQL finds a child that finished job ?1 holds (a held edge).
	heldChildSQL = `SELECT child_id FROM readpast_edges
WHERE parent_id = ?1 AND state = 'held' AND EXISTS (SELECT 1 FROM readpast_history WHERE id = ?1)
ORDER BY child_id LIMIT 1`
	// dropEdgesSQL deletes the edges of the deleted jobs in ?1 (a JSON
	// array of ids), as child or parent.
	dropEdgesSQL = `DELETE FROM readpast_edges
WHERE child_id IN (SELECT value FROM json_each(?1)) OR parent_id IN (SELECT value FROM json_each(?1))`
)

// Limits per key (migrations/0008_limits.sql). A key's row in
// readpast_groups carries the limit that governs it and its bucket; a
// missing row means nothing running, a full bucket, and the limit that
// governs the key when a row is created again.
const (
	// keyRowSQL reads key ?1's row.
	keyRowSQL = `SELECT running, max_running, limit_key, interval_us, burst, weight, tat, served_at, turn_used
FROM readpast_groups WHERE group_key = ?1`
	// resolveLimitsSQL reads the declared limits that may govern the keys
	// in ?1 (a JSON array): every template (index
	// readpast_limits_templates), and the limits declared for the keys
	// themselves (by primary key). resolveLimits picks each key's.
	resolveLimitsSQL = `SELECT key, concurrency, interval_us, burst, weight FROM readpast_limits
WHERE substr(key, -1) = '*'
UNION ALL
SELECT key, concurrency, interval_us, burst, weight FROM readpast_limits
WHERE key IN (SELECT value FROM json_each(?1)) AND substr(key, -1) <> '*'`
	// keySaveSQL counts ?2 more running jobs of key ?1, sets its tat to
	// ?7 and, unless NULL, its served_at to ?8 and its turn_used to ?10,
	// creating its row with the limit ?3..?6 and weight ?9 when it has
	// none.
	keySaveSQL = `INSERT INTO readpast_groups (group_key, running, max_running, limit_key, interval_us, burst, tat, served_at, weight, turn_used)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, coalesce(?10, 0))
ON CONFLICT (group_key) DO UPDATE SET running = running + excluded.running, tat = excluded.tat,
    served_at = coalesce(excluded.served_at, served_at), turn_used = coalesce(?10, turn_used)`
	// keysFromSQL lists the key rows from ?1 on, with their limits, in key
	// (byte) order: the rows whose key starts with ?1 come first
	// (governedKeys stops at the first that does not).
	keysFromSQL = `SELECT group_key, limit_key, max_running, interval_us, burst, weight, tat FROM readpast_groups
WHERE group_key >= ?1 ORDER BY group_key`
	// setKeyLimitSQL gives key ?1's row the limit ?2..?5, the tat ?6
	// (storekit.Bucket.Rescaled) and the weight ?7; its running count
	// stays. It returns the row's waiters (untouched), to mark.
	setKeyLimitSQL = `UPDATE readpast_groups
SET limit_key = ?2, max_running = ?3, interval_us = ?4, burst = ?5, tat = ?6, weight = ?7
WHERE group_key = ?1
RETURNING waiters`
	// putLimitSQL declares the limit of key or template ?1, weight ?8.
	putLimitSQL = `INSERT INTO readpast_limits (key, concurrency, rate, per_us, burst, interval_us, updated_at, weight)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
ON CONFLICT (key) DO UPDATE SET concurrency = excluded.concurrency, rate = excluded.rate,
    per_us = excluded.per_us, burst = excluded.burst, interval_us = excluded.interval_us,
    weight = excluded.weight, updated_at = excluded.updated_at`
	deleteLimitSQL = `DELETE FROM readpast_limits WHERE key = ?1`
	getLimitSQL    = `SELECT key, concurrency, rate, per_us, burst, weight FROM readpast_limits WHERE key = ?1`
	listLimitsSQL  = `SELECT key, concurrency, rate, per_us, burst, weight FROM readpast_limits ORDER BY key`
	// limitKeysSQL lists up to ?2 key rows the declared limit ?1 governs,
	// by key (index readpast_groups_limit).
	limitKeysSQL = `SELECT group_key, running, max_running, interval_us, burst, tat FROM readpast_groups
WHERE limit_key = ?1 ORDER BY group_key LIMIT ?2`
	// pruneGroupsSQL deletes up to ?2 rows of idle keys: nothing running
	// and a full bucket at ?1, what a missing row means, and no turn to
	// keep (no job waiting that is due before the turn, and none at all
	// when jobs were taken in the turn: turn_used).
	pruneGroupsSQL = `DELETE FROM readpast_groups WHERE group_key IN (
    SELECT group_key FROM readpast_groups WHERE running = 0 AND (tat IS NULL OR tat <= ?1)
      AND (turn_used = 0 OR NOT EXISTS (SELECT 1 FROM readpast_jobs j
          WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending'))
      AND (served_at IS NULL OR NOT EXISTS (SELECT 1 FROM readpast_jobs j
          WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending' AND j.run_at < readpast_groups.served_at))
    LIMIT ?2)`
)
