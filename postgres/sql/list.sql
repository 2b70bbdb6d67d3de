-- Jobs matching the filters (empty string = any), newest first, after the
-- cursor id $5 (0 = from the newest), at most $6.
SELECT * FROM (
    SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
           group_key, token::text, lease_expires_at, worker, created_at, started_at,
           NULL::timestamptz AS finished_at, errors, NULL::jsonb AS result,
           unique_key, unique_until, array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
    FROM readpast_jobs
    WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR group_key = $4) AND ($5 = 0 OR id < $5)
    UNION ALL
    SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
           group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
           finished_at, errors, result, unique_key, unique_until,
           array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
    FROM readpast_jobs_history
    WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR group_key = $4) AND ($5 = 0 OR id < $5)
) jobs
ORDER BY id DESC
LIMIT $6;
