-- The due pending job of queue $1 that has waited longest: the lowest
-- run_at, then the lowest id. Reads the queue's pending jobs (the live
-- table); locks nothing.
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs
WHERE queue = $1 AND state = 'pending' AND run_at <= now()
ORDER BY run_at, id
LIMIT 1;
