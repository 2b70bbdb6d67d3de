-- Delete schedule $1 and its runs; the jobs it made stay.
WITH gone AS (
    DELETE FROM readpast_schedules WHERE name = $1 RETURNING name
),
runs AS (
    DELETE FROM readpast_schedule_runs WHERE schedule IN (SELECT name FROM gone)
)
SELECT count(*) FROM gone;
