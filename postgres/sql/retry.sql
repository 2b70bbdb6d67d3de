-- Make a job pending now. A failed or cancelled job comes back from
-- history with the same id, its attempts reset and its errors kept; a
-- pending job's run-at becomes now. Running and succeeded jobs are left
-- alone (no row comes back). A grouped job gets a ready mark at its new
-- place in claim order; like enqueue, this touches no group row.
WITH old AS (
    DELETE FROM readpast_jobs_history
    WHERE id = $1 AND state IN ('failed', 'cancelled')
    RETURNING *
),
revived AS (
    INSERT INTO readpast_jobs
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts,
         worker, group_key, created_at, started_at, errors)
    SELECT id, queue, kind, payload, priority, now(), 'pending', 0, max_attempts,
           worker, group_key, created_at, started_at, errors
    FROM old
    RETURNING *
),
hurried AS (
    UPDATE readpast_jobs SET run_at = now()
    WHERE id = $1 AND state = 'pending'
    RETURNING *
),
changed AS (
    SELECT * FROM revived UNION ALL SELECT * FROM hurried
),
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, run_at, id, group_key FROM changed WHERE group_key IS NOT NULL
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM changed LIMIT 1) c
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb
FROM changed
WHERE (SELECT count(*) FROM notified) >= 0;
