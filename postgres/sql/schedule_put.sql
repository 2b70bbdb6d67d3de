-- Create or replace schedule $1 (PutSchedule). $5 paused: NULL keeps a
-- stored schedule's state (a new one runs). $12 is the first tick after
-- now, computed by the caller from the expression: it becomes the next
-- tick unless the schedule stays running with the same expression and
-- time zone: then its next tick is kept, so a restart that puts the same
-- schedules again neither skips nor repeats a tick. Every change bumps version,
-- so a scheduler that read the old definition fires nothing. Waits only
-- for another writer of the same schedule row (a put, pause, resume, or a
-- scheduler firing it).
--
-- A next tick never goes back to or before the last tick that fired
-- (last_run_at): the caller read its clock before this statement, and a
-- scheduler (whose clock may run ahead) may have fired a later tick
-- since. Then the update matches nothing and returns no row, and the
-- caller computes $12 again from the later of its clock and the last
-- fired tick. The check reads the row as locked, the latest version.
INSERT INTO readpast_schedules AS s
    (name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
     group_key, next_run_at)
VALUES ($1, $2, $3, $4, coalesce($5::boolean, false), $6, $7, $8::jsonb, $9, $10, $11,
        CASE WHEN coalesce($5::boolean, false) THEN NULL ELSE $12::timestamptz END)
ON CONFLICT (name) DO UPDATE SET
    cron = excluded.cron,
    time_zone = excluded.time_zone,
    catch_up = excluded.catch_up,
    paused = coalesce($5::boolean, s.paused),
    queue = excluded.queue,
    kind = excluded.kind,
    payload = excluded.payload,
    priority = excluded.priority,
    max_attempts = excluded.max_attempts,
    group_key = excluded.group_key,
    next_run_at = CASE
        WHEN coalesce($5::boolean, s.paused) THEN NULL
        WHEN NOT s.paused AND s.cron = excluded.cron AND s.time_zone = excluded.time_zone THEN s.next_run_at
        ELSE $12::timestamptz
    END,
    version = s.version + 1,
    updated_at = now()
WHERE coalesce($5::boolean, s.paused)
   OR (NOT s.paused AND s.cron = excluded.cron AND s.time_zone = excluded.time_zone)
   OR $12::timestamptz IS NULL OR s.last_run_at IS NULL OR $12::timestamptz > s.last_run_at
RETURNING name, cron, time_zone, catch_up, paused, queue, kind, payload, priority, max_attempts,
       group_key, next_run_at, last_run_at, last_job_id, version, created_at, updated_at, (xmax = 0) AS created;
