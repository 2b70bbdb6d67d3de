-- Claim, as claim.sql does, up to $3 jobs from the queues $1 for worker
-- $2, with a lease of $4 microseconds, under the claim token $5, in one
-- statement, when no group of those queues is ready: the claim routine
-- (routines/claim.sql) sends this one only after finding no due ready mark
-- in $1. Then claim.sql's group branches find nothing, and this statement
-- is its ungrouped branch alone: the same jobs, in the same order, with
-- the same locks, and a plan of 28 nodes instead of 91 (executor start-up,
-- most of it the claim's, was 12% of the server's CPU in a 100-worker
-- drain; docs/architecture.md, "The claim").
--
-- A mark committed between that check and this statement's snapshot is
-- not seen, as claim.sql does not see one committed after its own
-- snapshot: its group's jobs go to the next claim. This statement never
-- takes a grouped job, so no group limit depends on the check.
--
-- Rendered with "from" (claimUngroupedFromSQL), it starts at ($6 priority,
-- $7 run_at) in claim order instead of at the head: the remembered
-- position of postgres/claimfrom.go, which keeps a claim from walking the
-- index entries of the jobs claimed before it.
WITH {{template "claim_start" .}},
claim_time AS (
    SELECT clock_timestamp() AS at
),
picked AS (
    SELECT id, group_key, NULL::text[] AS more_keys FROM ungrouped
    ORDER BY priority, run_at, id
    LIMIT $3
),
held AS (
    SELECT NULL::text AS group_key WHERE false
),
{{template "claim_jobs"}}
{{template "claim_result"}};
