-- Complete a batch: each job moves from live to history as succeeded, only
-- if id, token and running state all match. Group slots are freed in the
-- same statement; group rows are locked in key order so concurrent
-- finishers cannot deadlock on them. Returns the ids that completed.
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::jsonb[]) AS t(id, token, result)
),
-- One primary-key lookup per input row (a join would let the planner scan
-- every running job), locking the rows whose claim is current.
target AS (
    SELECT j.id, i.result
    FROM input i
    CROSS JOIN LATERAL (
        SELECT id FROM readpast_jobs j
        WHERE j.id = i.id AND j.token = i.token AND j.state = 'running'
        FOR UPDATE
    ) j
),
done AS (
    DELETE FROM readpast_jobs j
    WHERE j.id = ANY (ARRAY(SELECT id FROM target))
    RETURNING j.*
),
moved AS (
    INSERT INTO readpast_jobs_history
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
         worker, group_key, created_at, started_at, finished_at, errors, result)
    SELECT d.id, queue, kind, payload, priority, run_at, 'succeeded', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), errors, t.result
    FROM done d JOIN target t ON t.id = d.id
),
freed_counts AS (
    SELECT group_key, count(*) AS n FROM done WHERE group_key IS NOT NULL GROUP BY group_key
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
SELECT id FROM done;
