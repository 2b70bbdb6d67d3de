-- The paused queues and when each was paused.
SELECT name, paused_at FROM readpast_queues WHERE paused_at IS NOT NULL ORDER BY name;
