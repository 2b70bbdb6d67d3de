-- Resume queue $1, and wake the workers of every process: its jobs are
-- claimable again.
WITH resumed AS (
    UPDATE readpast_queues SET paused_at = NULL WHERE name = $1 AND paused_at IS NOT NULL
    RETURNING name
),
notified AS (
    SELECT pg_notify('readpast', '') FROM resumed
)
SELECT count(*) FROM resumed WHERE (SELECT count(*) FROM notified) >= 0;
