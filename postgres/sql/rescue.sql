-- End up to $1 claims whose lease has expired. The rows are locked with
-- SKIP LOCKED and PostgreSQL re-checks "running and expired" on the newest
-- row version, so a rescue racing a late completion or a heartbeat can
-- never both win: this is the same id + token + running check as a
-- worker's write. Attempts left: back to pending, keeping its place in
-- claim order, with a ready mark when grouped. None left: to history as
-- failed. Group slots are freed and the groups' next jobs marked
-- (free_slots: job rows first, then group rows in key order).
--
-- Rendered with "from" (rescueFromSQL), it reads the lease index only
-- after the lease expiry $2: the store's remembered position
-- (postgres/claimfrom.go), so that it does not walk the entries of jobs
-- finished since the oldest open snapshot. It returns how many it ended
-- and its now(), which the store remembers.
WITH expired AS (
    SELECT id, group_key, more_keys, attempt < max_attempts AS retry,
           errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
               'attempt', attempt, 'at', now(), 'message', 'lease expired', 'worker', worker))) AS errors
    FROM readpast_jobs
    WHERE state = 'running' AND lease_expires_at <= now()
    {{- if .}}
      AND lease_expires_at > $2::timestamptz
    {{- end}}
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
retried AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, errors = e.errors
    FROM expired e
    WHERE j.id = e.id AND e.retry
    RETURNING j.id, j.queue, j.priority, j.run_at, j.group_key
),
{{template "settle_failed" "expired"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM expired LIMIT 1) e
)
SELECT count(*), now() FROM expired
WHERE (SELECT count(*) FROM notified) >= 0 AND readpast_stall('rescue.end', id);
