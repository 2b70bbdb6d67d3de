-- The latest $2 runs of schedule $1, newest first.
SELECT tick, job_id, catch_up, created_at
FROM readpast_schedule_runs
WHERE schedule = $1
ORDER BY tick DESC
LIMIT $2;
