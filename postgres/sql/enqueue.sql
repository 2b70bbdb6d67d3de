-- Enqueue a batch in one statement. Inputs are parallel arrays; rows come
-- back in input order (ids are assigned in that order). Group rows are
-- created as needed. Keys whose row already exists are filtered out before
-- the INSERT: ON CONFLICT would wait on a claim that has bumped that row
-- and not yet committed, and enqueue must never wait on claimers. A NULL
-- run-at means now on the database's clock, the clock claims compare with.
-- The NOTIFY is delivered when the caller's transaction commits, coalesced
-- per transaction.
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[], $6::int[], $7::text[])
        WITH ORDINALITY AS t(queue, kind, payload, priority, run_at, max_attempts, group_key, ord)
),
new_groups AS (
    INSERT INTO readpast_groups (group_key)
    SELECT DISTINCT i.group_key FROM input i
    WHERE i.group_key IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM readpast_groups g WHERE g.group_key = i.group_key)
    ORDER BY i.group_key
    ON CONFLICT (group_key) DO NOTHING
),
inserted AS (
    INSERT INTO readpast_jobs (queue, kind, payload, priority, run_at, max_attempts, group_key)
    SELECT queue, kind, payload, priority, coalesce(run_at, now()), max_attempts, group_key
    FROM input ORDER BY ord
    RETURNING *
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM input LIMIT 1) n
)
SELECT id, queue, kind, payload, priority, 'pending'::text, attempt, max_attempts, run_at,
       group_key, NULL::text, NULL::timestamptz, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb
FROM inserted
WHERE (SELECT count(*) FROM notified) >= 0
ORDER BY id;
