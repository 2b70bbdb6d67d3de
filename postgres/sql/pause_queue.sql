-- Pause queue $1: claims that start from now on take none of its jobs.
-- Pausing a paused queue keeps the time it was first paused.
INSERT INTO readpast_queues (name, paused_at) VALUES ($1, now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(readpast_queues.paused_at, now())
RETURNING paused_at;
