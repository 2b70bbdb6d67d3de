-- Search: among the newest $8 jobs with ids below $6 (live and finished
-- together), the first $7 that match, newest first. Filters: $1 queue,
-- $2 state, $3 kind, $4 group, $9 tag ('' = any), $5 text found, ignoring
-- case, in the payload or the errors as JSON text ('' = any). Each table is read
-- backwards along its primary key and at most $8 rows of it, so the cost
-- is bounded by $8 however rare the matches; a state filter skips the
-- table that cannot hold the state. Locks nothing.
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       finished_at, errors, result, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM (
    (SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
            group_key, token, lease_expires_at, worker, created_at, started_at,
            NULL::timestamptz AS finished_at, errors, NULL::jsonb AS result, unique_key, unique_until,
            tags, snoozes, more_keys
     FROM readpast_jobs
     WHERE id < $6 AND ($2 = '' OR $2 IN ('blocked', 'pending', 'running'))
     ORDER BY id DESC
     LIMIT $8)
    UNION ALL
    (SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
            group_key, token, NULL::timestamptz, worker, created_at, started_at,
            finished_at, errors, result, unique_key, unique_until,
            tags, snoozes, more_keys
     FROM readpast_jobs_history
     WHERE id < $6 AND ($2 = '' OR $2 IN ('succeeded', 'failed', 'cancelled'))
     ORDER BY id DESC
     LIMIT $8)
    ORDER BY id DESC
    LIMIT $8
) scanned
WHERE ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR kind = $3)
  AND ($4 = '' OR group_key = $4) AND ($9 = '' OR $9 = ANY (tags))
  AND ($5 = '' OR strpos(lower(payload::text), lower($5)) > 0 OR strpos(lower(errors::text), lower($5)) > 0)
ORDER BY id DESC
LIMIT $7;
