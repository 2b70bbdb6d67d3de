-- Cancel live job $1: it moves to history as cancelled. A running job's
-- token stops being current, its group slot is freed and the group's next
-- jobs marked (free_slots: job row first, then the group row).
--
-- $2 "only pending" (CancelPending) matches the job only while it is
-- pending: a running job is left alone. When a claim holds the row of a
-- job this statement reads as pending, the DELETE waits for it and
-- PostgreSQL re-checks the WHERE on the row as the claim committed it:
-- the job is running by then and is not matched, so a job claimed
-- meanwhile is never cancelled under its worker. No row: the job is not
-- live, or (with $2) not pending; the store reads it to say which.
--
-- $3, a claim token (CancelClaimed; NULL for none), matches the job only
-- while it runs under that claim. A rescue or a finish that holds the row
-- is waited for, and the WHERE re-checked on the row it left: the token
-- is no longer current, so an attempt that lost its lease never cancels
-- the job under the worker that claimed it next. No row: the token is
-- stale, or the job unknown.
WITH done AS (
    DELETE FROM readpast_jobs
    WHERE id = $1 AND (NOT $2::boolean OR state = 'pending')
      AND ($3::uuid IS NULL OR (state = 'running' AND token = $3::uuid))
    RETURNING *
),
moved AS (
    {{template "history_insert"}}
    SELECT id, queue, kind, payload, priority, run_at, 'cancelled', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), errors, NULL, unique_key, unique_until,
           tags, snoozes, more_keys
    FROM done
    RETURNING *
),
changes AS (
    SELECT queue, 'cancelled' AS state, 1::bigint AS n FROM done
    UNION ALL
    SELECT queue, state, -1 FROM done
),
{{template "count_changes"}},
freeing AS (
    SELECT group_key, count(*) AS n
    FROM (SELECT group_key FROM done WHERE group_key IS NOT NULL AND state = 'running'
          UNION ALL
          SELECT unnest(more_keys) FROM done WHERE more_keys IS NOT NULL AND state = 'running') k
    GROUP BY group_key
),
{{template "free_slots"}},
ending AS (
    SELECT id, unique_key FROM done WHERE unique_key IS NOT NULL
),
{{template "release_keys"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM freed LIMIT 1) f
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, NULL::timestamptz, worker, created_at, started_at,
       finished_at, errors, result, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM moved
WHERE (SELECT count(*) FROM notified) >= 0 AND readpast_stall('cancel.end', id);
