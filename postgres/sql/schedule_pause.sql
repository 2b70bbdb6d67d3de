-- Pause schedule $1: no ticks until it is resumed.
UPDATE readpast_schedules
SET paused = true, next_run_at = NULL, version = version + 1, updated_at = now()
WHERE name = $1
RETURNING name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at;
