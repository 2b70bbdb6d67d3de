-- Fire one tick of schedule $1 (FireSchedule). The UPDATE matches only if
-- the schedule is still at version $2, running, with its next tick at $3:
-- what the scheduler read. Of several schedulers racing for a tick, the
-- first to update the row wins; the others wait for its row lock, and
-- PostgreSQL re-checks the WHERE on the row as it committed it (its next
-- tick has moved), so they match nothing and enqueue nothing. Exactly one
-- job per tick, by construction, with no leader.
--
-- When it matches: the next tick becomes $5 (NULL: none), and, when $4 is
-- set and later than the last tick that fired (last_run_at, on the row
-- as locked: a tick fires once, whatever happened to its run row, which
-- the trimming below deletes in time), the tick's job is enqueued (run at the tick, with a ready mark when
-- grouped, as enqueue does) and recorded in readpast_schedule_runs with
-- the schedule's latest 100 runs kept; $6 marks a job that stands for
-- missed ticks. $4 NULL only moves the next tick (missed ticks skipped).
-- Returns whether it matched and the job's id.
--
-- Locks: the schedule's row only (and inserts). It waits only for another
-- scheduler firing, or a person changing, the same schedule.
WITH newid AS (
    SELECT nextval('readpast_job_id_seq') AS id WHERE $4::timestamptz IS NOT NULL
),
fired AS (
    UPDATE readpast_schedules s
    SET next_run_at = $5::timestamptz,
        last_run_at = CASE WHEN $4::timestamptz > coalesce(s.last_run_at, '-infinity') THEN $4::timestamptz ELSE s.last_run_at END,
        last_job_id = CASE WHEN $4::timestamptz > coalesce(s.last_run_at, '-infinity') THEN (SELECT id FROM newid) ELSE s.last_job_id END
    WHERE s.name = $1 AND s.version = $2 AND NOT s.paused AND s.next_run_at = $3::timestamptz
      AND readpast_stall('schedule.fire', s.version)
    RETURNING s.*, s.last_job_id IS NOT DISTINCT FROM (SELECT id FROM newid) AND $4::timestamptz IS NOT NULL AS fresh
),
job AS (
    INSERT INTO readpast_jobs (id, queue, kind, payload, priority, run_at, max_attempts, group_key)
    SELECT (SELECT id FROM newid), f.queue, f.kind, f.payload, f.priority, $4::timestamptz,
           f.max_attempts, f.group_key
    FROM fired f
    WHERE f.fresh
    RETURNING id, queue, priority, run_at, group_key
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM job
),
{{template "count_changes"}},
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM job WHERE group_key IS NOT NULL
),
run AS (
    INSERT INTO readpast_schedule_runs (schedule, tick, job_id, catch_up)
    SELECT $1, $4::timestamptz, id, $6::boolean FROM job
    WHERE readpast_stall('schedule.fired', id)
),
trimmed AS (
    DELETE FROM readpast_schedule_runs r
    WHERE r.schedule = $1 AND EXISTS (SELECT 1 FROM job)
      AND r.tick < (SELECT tick FROM readpast_schedule_runs
                    WHERE schedule = $1 ORDER BY tick DESC OFFSET 98 LIMIT 1)
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM job LIMIT 1) j
)
SELECT (SELECT count(*) FROM fired) > 0, (SELECT id FROM job)
WHERE (SELECT count(*) FROM notified) >= 0;
