-- Give a running job back unworked: pending at once, the attempt not
-- counted, its group slot freed. Only for the current claim.
WITH target AS (
    SELECT id, group_key FROM readpast_jobs
    WHERE id = $1 AND token = $2 AND state = 'running'
    FOR UPDATE
),
released AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, attempt = j.attempt - 1
    FROM target t WHERE j.id = t.id
),
freed AS (
    UPDATE readpast_groups g SET running = g.running - 1
    FROM target t WHERE g.group_key = t.group_key
),
notified AS (
    SELECT pg_notify('readpast', '') FROM target
)
SELECT count(*) FROM target WHERE (SELECT count(*) FROM notified) >= 0;
