-- Cancel a live job: it moves to history as cancelled. A running job's
-- token stops being current and its group slot is freed.
WITH done AS (
    DELETE FROM readpast_jobs WHERE id = $1 RETURNING *
),
moved AS (
    INSERT INTO readpast_jobs_history
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
         worker, group_key, created_at, started_at, finished_at, errors, result)
    SELECT id, queue, kind, payload, priority, run_at, 'cancelled', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), errors, NULL
    FROM done
    RETURNING *
),
freed AS (
    UPDATE readpast_groups g SET running = g.running - 1
    FROM done d WHERE d.state = 'running' AND g.group_key = d.group_key
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
       finished_at, errors, result
FROM moved;
