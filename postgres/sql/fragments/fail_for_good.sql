{{/*
fail_for_good moves the jobs whose attempts are used up to the history as
failed. Its argument names a CTE of the job rows this statement holds,
    (id bigint, retry bool, errors jsonb, ...)
and a CTE retried (queue text, ...) of the jobs it made pending again. It
defines dead (the deleted live rows, with new_errors), moved, and
changes, the statement's net change to the counts (for count_changes).
Used by settle_failed (fail.sql and rescue.sql), so that the history's
columns and the counting are written once for both.
*/}}{{define "fail_for_good"}}
dead AS (
    DELETE FROM readpast_jobs j
    USING {{.}} src
    WHERE j.id = src.id AND NOT src.retry
    RETURNING j.*, src.errors AS new_errors
),
moved AS (
    {{template "history_insert"}}
    SELECT id, queue, kind, payload, priority, run_at, 'failed', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), new_errors, NULL, unique_key, unique_until,
           tags, snoozes, more_keys
    FROM dead
    RETURNING queue
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM retried
    UNION ALL
    SELECT queue, 'running', -1 FROM retried
    UNION ALL
    SELECT queue, state, -1 FROM dead
    UNION ALL
    SELECT queue, 'failed', 1 FROM moved
)
{{- end}}
