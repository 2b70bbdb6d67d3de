{{/*
claim_start begins both claims (claim.sql, claim_ungrouped.sql): it
defines
    open_queues (name text): the queues of $1 that are not paused
        (readpast_queues, read without a lock: a pause that commits while
        the claim runs takes effect on the next claim);
    ungrouped (id bigint, priority integer, run_at timestamptz,
        group_key text): per open queue, its first $3 pending ungrouped
        jobs that are due, in claim order, locked FOR UPDATE SKIP LOCKED
        (group_key is NULL, so that the rows line up with grouped ones).
Given non-empty data (claim_ungrouped.sql passes its own, which queries.go
sets to "from" for claimUngroupedFromSQL), ungrouped reads two ranges of
the claim order instead of starting at its head: the jobs of priority $6
with a run_at from $7 up to (not including) $8, and every job after the
position ($6, $8, $9). The row comparisons are index conditions, so each
scan begins (and the first ends) there, and the index entries of the jobs
claimed before the position are never read (see postgres/claimfrom.go).
*/}}{{define "claim_start"}}
open_queues AS (
    SELECT name FROM unnest($1::text[]) AS q(name)
    WHERE NOT EXISTS (SELECT 1 FROM readpast_queues p WHERE p.name = q.name AND p.paused_at IS NOT NULL)
),
ungrouped AS (
    SELECT j.id, j.priority, j.run_at, NULL::text AS group_key
    FROM open_queues q
    CROSS JOIN LATERAL (
        {{- if .}}
        SELECT * FROM (
            SELECT id, priority, run_at
            FROM readpast_jobs
            WHERE queue = q.name AND state = 'pending' AND group_key IS NULL AND run_at <= now()
              AND (priority, run_at, id) > ($6::integer, $7::timestamptz, 0)
              AND (priority, run_at, id) < ($6::integer, $8::timestamptz, 0)
            ORDER BY priority, run_at, id
            LIMIT $3
            FOR UPDATE SKIP LOCKED
        ) slack
        UNION ALL
        SELECT * FROM (
            SELECT id, priority, run_at
            FROM readpast_jobs
            WHERE queue = q.name AND state = 'pending' AND group_key IS NULL AND run_at <= now()
              AND (priority, run_at, id) > ($6::integer, $8::timestamptz, $9::bigint)
            ORDER BY priority, run_at, id
            LIMIT $3
            FOR UPDATE SKIP LOCKED
        ) after_position
        {{- else}}
        SELECT id, priority, run_at
        FROM readpast_jobs
        WHERE queue = q.name AND state = 'pending' AND group_key IS NULL AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
        {{- end}}
    ) j
){{end}}
