-- The jobs $1, live or finished, in the columns of get.sql: one snapshot
-- sees each in exactly one table. An id with no row (a finished job since
-- pruned or deleted) returns nothing. Locks nothing.
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs WHERE id = ANY ($1::bigint[])
UNION ALL
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
       finished_at, errors, result, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs_history WHERE id = ANY ($1::bigint[]);
