-- Pause queue $1: no claim takes its jobs once this has committed. It
-- first takes the queue's pause key exclusively (advisory lock 1919181685,
-- hashtext(name); see sql/claim_queues.sql), which waits for the claims
-- that hold it in shared mode to end: a claim whose snapshot predates the
-- pause has committed (its jobs were taken before the pause) by the time
-- the pause returns, and every claim that takes the key later reads the
-- pause. Claims that ask for the key while the pause holds or waits for it
-- leave the queue out, without waiting.
-- Pausing a paused queue keeps the time it was first paused.
WITH locked AS (
    SELECT pg_advisory_xact_lock(1919181685, hashtext($1))
)
INSERT INTO readpast_queues (name, paused_at)
SELECT $1, now() FROM locked
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(readpast_queues.paused_at, now())
RETURNING paused_at;
