-- End up to $1 claims whose lease has expired. The rows are locked with
-- SKIP LOCKED and PostgreSQL re-checks "running and expired" on the newest
-- row version, so a rescue racing a late completion or a heartbeat can
-- never both win: this is the same id + token + running check as a
-- worker's write. Attempts left: back to pending, keeping its place in
-- claim order. None left: to history as failed. Group slots are freed.
WITH expired AS (
    SELECT id, group_key, attempt < max_attempts AS retry,
           errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
               'attempt', attempt, 'at', now(), 'message', 'lease expired', 'worker', worker))) AS errors
    FROM readpast_jobs
    WHERE state = 'running' AND lease_expires_at <= now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
retried AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, errors = e.errors
    FROM expired e
    WHERE j.id = e.id AND e.retry
),
dead AS (
    DELETE FROM readpast_jobs j
    USING expired e
    WHERE j.id = e.id AND NOT e.retry
    RETURNING j.*, e.errors AS new_errors
),
moved AS (
    INSERT INTO readpast_jobs_history
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
         worker, group_key, created_at, started_at, finished_at, errors, result)
    SELECT id, queue, kind, payload, priority, run_at, 'failed', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), new_errors, NULL
    FROM dead
),
freed_counts AS (
    SELECT group_key, count(*) AS n FROM expired WHERE group_key IS NOT NULL GROUP BY group_key
),
locked AS (
    SELECT g.group_key, c.n
    FROM readpast_groups g JOIN freed_counts c USING (group_key)
    ORDER BY g.group_key
    FOR UPDATE OF g
),
freed AS (
    UPDATE readpast_groups g SET running = g.running - l.n
    FROM locked l WHERE g.group_key = l.group_key
)
SELECT count(*) FROM expired;
