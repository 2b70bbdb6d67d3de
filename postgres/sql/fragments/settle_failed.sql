{{/*
settle_failed ends failed attempts once their rows are held and the jobs
with attempts left are pending again: it marks those of a group ready at
their turn, moves the rest to the history (fail_for_good), counts the
changes, frees the attempts' group slots and marks the groups' next jobs
(free_slots), and releases the unique keys of the jobs that ended. Its
argument names the CTE of the held rows,
    (id bigint, group_key text, more_keys text[], retry bool, errors jsonb, ...)
and it needs a CTE retried (id, queue, priority, run_at, group_key) of the
jobs made pending again. Shared by fail.sql (a worker's failure) and
rescue.sql (a lease that expired): one attempt ends the same way whoever
ends it.
*/}}{{define "settle_failed"}}
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM retried WHERE group_key IS NOT NULL
),
{{template "fail_for_good" .}},
{{template "count_changes"}},
freeing AS (
    SELECT group_key, count(*) AS n
    FROM (SELECT group_key FROM {{.}} WHERE group_key IS NOT NULL
          UNION ALL
          SELECT unnest(more_keys) FROM {{.}} WHERE more_keys IS NOT NULL) k
    GROUP BY group_key
),
{{template "free_slots"}},
ending AS (
    SELECT id, unique_key FROM dead WHERE unique_key IS NOT NULL
),
{{template "release_keys"}}
{{- end}}
