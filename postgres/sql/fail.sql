-- Record failed attempts. Each job with a matching id, token and running
-- state either goes back to pending at its retry time (attempts left, not
-- discarded) or moves to history as failed. The attempt's error is appended
-- to errors either way. The caller sends each (id, token) pair once, sorted
-- by id; group slots are freed, retried grouped jobs get a ready mark, and
-- the groups' next jobs are marked (free_slots). Returns the ids that
-- changed, and for each whether other processes' claimers should be
-- woken (a job pending again, or a key's slot freed): the store sends
-- that NOTIFY once the statement has committed (postgres/notify.go), so
-- that this transaction does not hold PostgreSQL's notify lock through
-- its commit.
WITH input AS (
    SELECT *
    FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[], $6::bool[])
        AS t(id, token, message, stack, retry_at, discard)
),
-- One locked primary-key lookup per input row, as in complete.sql (the
-- token match is the running check).
target AS (
    SELECT j.id, i.token, j.group_key, j.more_keys,
           (j.attempt < j.max_attempts AND NOT i.discard) AS retry,
           coalesce(i.retry_at, now()) AS retry_at,
           j.errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
               'attempt', j.attempt, 'at', now(), 'message', i.message,
               'stack', nullif(i.stack, ''), 'worker', j.worker))) AS errors
    FROM input i
    CROSS JOIN LATERAL (
        SELECT id, group_key, more_keys, attempt, max_attempts, errors, worker FROM readpast_jobs j
        WHERE j.id = i.id AND j.token = i.token
        FOR UPDATE
    ) j
),
retried AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, run_at = t.retry_at, errors = t.errors
    FROM target t
    WHERE j.id = t.id AND t.retry
    RETURNING j.id, j.queue, j.priority, j.run_at, j.group_key
),
{{template "settle_failed" "target"}}
SELECT id, token::text, retry OR group_key IS NOT NULL FROM target;
