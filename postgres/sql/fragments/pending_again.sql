{{/*
pending_again ends a statement that made running jobs pending again
without counting their attempt (release.sql, snooze.sql). It expects
    target (id bigint, group_key text, more_keys text[]): the job rows the
    statement holds,
and its argument names the CTE of those jobs as they are now,
    (id, queue, priority, run_at, group_key), pending again;
it gives each grouped one a ready mark at its new place in claim order
(a job that became pending in this statement is invisible to its own
snapshot, so nobody else would mark it), frees the group slots they held
and marks the groups' next jobs (free_slots: job rows first, then group
rows in key order), wakes waiting claimers, and returns how many jobs it
changed.
*/}}{{define "pending_again"}}
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM {{.}} WHERE group_key IS NOT NULL
),
freeing AS (
    SELECT group_key, count(*) AS n
    FROM (SELECT group_key FROM target WHERE group_key IS NOT NULL
          UNION ALL
          SELECT unnest(more_keys) FROM target WHERE more_keys IS NOT NULL) k
    GROUP BY group_key
),
{{template "free_slots"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM target LIMIT 1) t
)
SELECT count(*) FROM target WHERE (SELECT count(*) FROM notified) >= 0{{end}}
