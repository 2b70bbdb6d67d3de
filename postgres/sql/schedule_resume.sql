-- Resume schedule $1 if it is still at version $2 (the caller computed
-- $3, its first tick after now, from the definition of that version).
UPDATE readpast_schedules
SET paused = false, next_run_at = $3::timestamptz, version = version + 1, updated_at = now()
WHERE name = $1 AND version = $2
RETURNING name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at;
