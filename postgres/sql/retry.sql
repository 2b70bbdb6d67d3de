-- Make a job pending now. A failed or cancelled job comes back from
-- history with the same id, its attempts and snoozes reset, its errors
-- and tags kept (its tag rows never left); a
-- pending job's run-at becomes now. Running and succeeded jobs are left
-- alone (no row comes back). A grouped job gets a ready mark at its new
-- place in claim order; like enqueue, this touches no group row.
--
-- A job coming back from history keeps its unique key and takes it again
-- (its period, if any, still counts from the first enqueue): the key row
-- is inserted, or taken over when it no longer holds the key or is this
-- job's own. When another job holds the key, nothing changes and no row
-- comes back (the store explains). Lock order: the history row, then the
-- key row; this waits for whoever holds either (a prune, an enqueue or
-- finisher of the same key).
WITH cand AS (
    SELECT id, unique_key, unique_until FROM readpast_jobs_history
    WHERE id = $1 AND state IN ('failed', 'cancelled')
    FOR UPDATE
),
took AS (
    INSERT INTO readpast_unique_keys AS k (unique_key, job_id, keep_until)
    SELECT unique_key, id, unique_until FROM cand WHERE unique_key IS NOT NULL
    ON CONFLICT (unique_key) DO UPDATE
    SET job_id = excluded.job_id, live = true, keep_until = excluded.keep_until
    WHERE k.job_id = excluded.job_id OR (NOT k.live AND k.keep_until <= now())
    RETURNING job_id
),
old AS (
    DELETE FROM readpast_jobs_history h
    USING cand c
    WHERE h.id = c.id AND (c.unique_key IS NULL OR EXISTS (SELECT 1 FROM took))
    RETURNING h.*
),
revived AS (
    INSERT INTO readpast_jobs
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts,
         worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, snoozes, more_keys,
         has_children)
    SELECT id, queue, kind, payload, priority, now(), 'pending', 0, max_attempts,
           worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, 0, more_keys,
           -- a parent that holds back children releases them when it succeeds
           EXISTS (SELECT 1 FROM readpast_edges d WHERE d.parent_id = old.id AND d.state <> 'done')
    FROM old
    RETURNING *
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM revived
),
{{template "count_changes"}},
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
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM changed WHERE group_key IS NOT NULL
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM changed LIMIT 1) c
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM changed
WHERE (SELECT count(*) FROM notified) >= 0;
