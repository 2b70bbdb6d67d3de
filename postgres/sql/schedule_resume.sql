-- Resume schedule $1 if it is still at version $2 (the caller computed
-- $3, its first tick after the later of now and the last tick that fired,
-- from the definition of that version). A next tick never goes back to or
-- before the last fired tick: otherwise nothing matches.
UPDATE readpast_schedules
SET paused = false, next_run_at = $3::timestamptz, version = version + 1, updated_at = now()
WHERE name = $1 AND version = $2
  AND ($3::timestamptz IS NULL OR last_run_at IS NULL OR $3::timestamptz > last_run_at)
RETURNING name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at;
