-- One schedule by name.
SELECT name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at
FROM readpast_schedules WHERE name = $1;
