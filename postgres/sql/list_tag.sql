-- list.sql for the jobs carrying tag $7: walks the primary key of
-- readpast_job_tags backwards from the cursor id $5 (the caller passes the
-- largest bigint for the first page), one primary-key lookup per tag row
-- in each jobs table, and stops after $6 jobs that match the other
-- filters (empty string = any). Reads only; locks nothing.
SELECT j.*
FROM readpast_job_tags t
CROSS JOIN LATERAL (
    SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
           group_key, token::text, lease_expires_at, worker, created_at, started_at,
           NULL::timestamptz AS finished_at, errors, NULL::jsonb AS result,
           unique_key, unique_until, array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
    FROM readpast_jobs
    WHERE id = t.job_id
      AND ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR group_key = $4)
    UNION ALL
    SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
           group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
           finished_at, errors, result, unique_key, unique_until,
           array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
    FROM readpast_jobs_history
    WHERE id = t.job_id
      AND ($1 = '' OR queue = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR kind = $3)
      AND ($4 = '' OR group_key = $4)
) j
WHERE t.tag = $7 AND t.job_id < $5
ORDER BY t.job_id DESC
LIMIT $6;
