-- Retrying jobs: pending after a failed attempt (attempt > 0), of queue
-- $1 ('' = every queue). Reads at most $3 of them along the retrying
-- index (0014), those whose latest attempt started last first, and
-- returns $2 of those, newest failure first: the time of the latest error
-- (errors' last element), then the higher id. The first column counts the
-- jobs read, up to $3 + 1: more than $3 means some were left unread.
-- Reads the index's entries and their rows only; locks nothing.
SELECT n_read, id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM (
    SELECT j.*, count(*) OVER () AS n_read,
           row_number() OVER (ORDER BY started_at DESC, id DESC) AS place
    FROM (
        SELECT * FROM readpast_jobs
        WHERE state = 'pending' AND attempt > 0 AND ($1 = '' OR queue = $1)
        ORDER BY started_at DESC, id DESC
        LIMIT $3 + 1
    ) j
) c
WHERE place <= $3
ORDER BY (errors -> -1 ->> 'at')::timestamptz DESC NULLS LAST, id DESC
LIMIT $2;
