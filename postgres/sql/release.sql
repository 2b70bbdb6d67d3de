-- Give running jobs back unworked: pending at once, the attempt not
-- counted, group slots freed, ready marks for the released grouped jobs
-- and the groups' next jobs (free_slots: job rows first, then group rows
-- in key order). $1 names one job by id with its token $2 (Release), or
-- is NULL to release every job the claim with token $2 took (a claim
-- whose outcome its caller never learned); then $3 bounds the search to
-- leases ending within 10 minutes before now + $3 microseconds, where
-- that claim's leases must end, so the lease index finds them.
-- A job's token is set exactly while it runs (CHECK on readpast_jobs), so
-- the token match is the running check. The store runs this with custom
-- plans (the parameters known): by id it is a primary-key lookup; by
-- claim token it is a range of the partial lease index, which needs the
-- state spelled out.
WITH target AS (
    SELECT id, group_key, more_keys FROM readpast_jobs
    WHERE token = $2::uuid
      AND ($1::bigint IS NULL OR id = $1)
      AND ($1::bigint IS NOT NULL OR (state = 'running' AND lease_expires_at BETWEEN
             now() + $3::bigint * interval '1 microsecond' - interval '10 minutes'
             AND now() + $3::bigint * interval '1 microsecond'))
    ORDER BY id
    FOR UPDATE
),
released AS (
    UPDATE readpast_jobs j
    SET state = 'pending', token = NULL, lease_expires_at = NULL, attempt = j.attempt - 1
    FROM target t WHERE j.id = t.id
    RETURNING j.id, j.queue, j.priority, j.run_at, j.group_key
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM released
    UNION ALL
    SELECT queue, 'running', -1 FROM released
),
{{template "count_changes"}},
{{template "pending_again" "released"}};
