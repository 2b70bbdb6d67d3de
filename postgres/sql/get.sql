-- One job, live or finished. One snapshot sees it in exactly one table.
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs WHERE id = $1
UNION ALL
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
       finished_at, errors, result, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs_history WHERE id = $1;
