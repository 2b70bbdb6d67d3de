{{/*
claim_jobs ends both claims (claim.sql, claim_ungrouped.sql). It expects
    picked (id bigint, group_key text, more_keys text[]): the jobs to
        claim, locked;
    held (group_key text): the keys whose rows this claim holds;
it makes the picked jobs that are ungrouped, or whose every key is held,
running
under the token $5 for worker $2, with a lease of $4 microseconds, and
returns them in claim order (claim_result), as scanClaimed (scan.go)
reads them.

The claim's time (claim_time, defined by each claim: in claim.sql once
the key rows are locked, as the limits of those keys count their starts
at the very time the jobs record as started_at) is read once, after the
statement's snapshot, so a job's claims are in started_at order even when
a transaction began long before its claim (a claim in a caller's
transaction, or a routine's session stalled between its call and its
statement), which now() (the transaction's start) is not.
*/}}{{define "claim_jobs"}}
claimed AS (
    UPDATE readpast_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        token = $5::uuid,
        worker = $2,
        started_at = (SELECT at FROM claim_time),
        lease_expires_at = (SELECT at FROM claim_time) + $4::bigint * interval '1 microsecond'
    WHERE j.id = ANY (ARRAY(
            SELECT id FROM picked
            WHERE group_key IS NULL
               OR (group_key IN (SELECT group_key FROM held)
                   AND (more_keys IS NULL OR more_keys <@ ARRAY(SELECT group_key FROM held)))))
      AND j.state = 'pending'
    RETURNING j.*
),
changes AS (
    SELECT queue, 'running' AS state, 1::bigint AS n FROM claimed
    UNION ALL
    SELECT queue, 'pending', -1 FROM claimed
),
{{template "count_changes"}}{{end}}{{/*
claim_result returns the claimed jobs, the columns that differ from job to
job only: what the claim set on every job alike (state running, the token
$5, the worker $2, a lease of $4 microseconds from started_at) the caller
knows already: six columns fewer than a Job row (sql/get.sql); and the
job's creation context (traceparent, tracestate), which get.sql lacks. With
them, and a job allocated at a time, reading a claim's rows was 18% of
the client's CPU in a 1000-worker drain; without, 9% (docs/benchmarks.md).


Its last column, due, is NULL on every job's row. claim_result_due
(claim.sql, which expects CTEs due and more (payload text), each of at
most one row) adds a row for each whose columns are all NULL but due: the
"due:" payload that lists the next starts of the keys the claim left out
of tokens, which the store announces once the claim has committed, and
"more" when keyed jobs the claim could not take may be claimable now
(scanClaimed, postgres/claimmore.go).
*/}}{{define "claim_columns"}}
SELECT id, queue, kind, payload, priority, attempt, max_attempts, run_at,
       group_key, created_at, started_at, errors, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, traceparent, tracestate, array_to_string(more_keys, ' '),
       NULL::text AS due
FROM claimed
WHERE readpast_stall('claim.end', id){{end}}{{define "claim_result"}}
{{- template "claim_columns"}}
ORDER BY priority, run_at, id{{end}}{{define "claim_result_due"}}
{{- template "claim_columns"}}
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, payload
FROM due
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, payload
FROM more
ORDER BY priority, run_at, id{{end}}
