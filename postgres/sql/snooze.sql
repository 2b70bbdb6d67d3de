-- Snooze running job $1 held with token $2: pending again at now + $3
-- microseconds, its attempt not counted, its snoozes one more, its group
-- slot freed. A grouped job gets a ready mark at its new place in claim
-- order (a mark not yet due stays until it is), and the group's next jobs
-- are marked (free_slots). As in release.sql, the token match is the
-- running check, and a stale token matches nothing. Lock order: the job
-- row, then its group's row (free_slots). It waits only for whoever holds
-- that job row (another write with the same token, a bulk action) or the
-- group row (a finisher of the same group); claims skip both.
WITH target AS (
    SELECT id, group_key, more_keys FROM readpast_jobs
    WHERE id = $1 AND token = $2::uuid
    FOR UPDATE
),
snoozed AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, attempt = j.attempt - 1,
        snoozes = j.snoozes + 1, run_at = now() + $3::bigint * interval '1 microsecond'
    FROM target t WHERE j.id = t.id
    RETURNING j.id, j.queue, j.priority, j.run_at, j.group_key
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM snoozed
    UNION ALL
    SELECT queue, 'running', -1 FROM snoozed
),
{{template "count_changes"}},
{{template "pending_again" "snoozed"}};
