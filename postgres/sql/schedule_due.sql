-- Up to $2 running schedules whose next tick is at or before $1, the
-- earliest first (the partial index readpast_schedules_due).
SELECT name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at
FROM readpast_schedules
WHERE NOT paused AND next_run_at <= $1
ORDER BY next_run_at
LIMIT $2;
