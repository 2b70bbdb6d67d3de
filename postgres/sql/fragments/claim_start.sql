{{/*
claim_start begins both claims (claim.sql, claim_ungrouped.sql): it
defines
    open_queues (name text): the queues of $1 that are not paused
        (readpast_queues, read without a row lock: $1 holds only queues
        whose pause keys the claim took before this statement began,
        sql/claim_queues.sql, so a pause either committed before this
        snapshot or waits for the claim to end);
    ungrouped (id bigint, priority integer, run_at timestamptz,
        group_key text): per open queue, its first $3 pending ungrouped
        jobs that are due, in claim order, locked FOR UPDATE SKIP LOCKED
        (group_key is NULL, so that the rows line up with grouped ones).
Given non-empty data (claim_ungrouped.sql passes its own, which queries.go
sets to "from" for claimUngroupedFromSQL), ungrouped starts at ($6
priority, $7 run_at) in claim order instead of at its head: the row
comparison is an index condition, so the scan begins there and never
reads the index entries before it (see postgres/claimfrom.go). One range
with one LIMIT: a scan that must find its LIMIT past the due jobs walks
the entries of the jobs not yet due of its priority, so the range is not
split in two.
*/}}{{define "claim_start"}}
open_queues AS (
    SELECT name FROM unnest($1::text[]) AS q(name)
    WHERE readpast_stall('claim.queues', q.name)
      AND NOT EXISTS (SELECT 1 FROM readpast_queues p WHERE p.name = q.name AND p.paused_at IS NOT NULL)
),
ungrouped AS (
    SELECT j.id, j.priority, j.run_at, NULL::text AS group_key
    FROM open_queues q
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at
        FROM readpast_jobs
        WHERE queue = q.name AND state = 'pending' AND group_key IS NULL AND run_at <= now()
        {{- if .}}
          AND (priority, run_at) >= ($6::integer, $7::timestamptz)
        {{- end}}
        ORDER BY priority, run_at, id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ) j
){{end}}
