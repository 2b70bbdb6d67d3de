-- Make pending job $1 due now (RunNow): its run-at becomes now() when it
-- is later, and stays when the job is due already, so a due job keeps its
-- place in claim order. Only a pending job qualifies.
--
-- hurried matches only a pending job that is not yet due: a due job's row
-- is neither written nor locked, so no claim waits for, or skips, a row
-- this statement holds for nothing. When another transaction holds the row
-- of a job hurried reads as not yet due (a claim whose clock is already
-- past the job's run-at, a cancel, another RunNow), the UPDATE waits for
-- it and PostgreSQL re-checks the WHERE on the row as that transaction
-- left it: a job claimed meanwhile is running, one cancelled meanwhile is
-- gone, and hurried matches nothing.
--
-- The result is the job as hurried made it (hurried true), or, when
-- hurried matched nothing, as the statement's snapshot shows it (hurried
-- false), with now(): the store tells a job due already (returned
-- unchanged), a job that is not pending (refused) and a job that changed
-- after the snapshot (looked at again) apart. No row: the job is not live.
--
-- A grouped job gets a ready mark at its new place in claim order (its
-- key's turn), as retry.sql does, so that it is claimable at once when its
-- key has a free slot; the mark its enqueue made at the old run-at stays,
-- and a claim that meets it when it comes due finds it stale. Like
-- enqueue, this touches no group row. Locks: the job's row only, and only
-- for a job not yet due.
WITH hurried AS (
    UPDATE readpast_jobs SET run_at = now()
    WHERE id = $1 AND state = 'pending' AND run_at > now()
      AND readpast_stall('run_now.update', id)
    RETURNING *
),
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM hurried WHERE group_key IS NOT NULL
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM hurried LIMIT 1) h
)
SELECT true, now(), id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM hurried
WHERE (SELECT count(*) FROM notified) >= 0
UNION ALL
SELECT false, now(), id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM readpast_jobs
WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM hurried);
