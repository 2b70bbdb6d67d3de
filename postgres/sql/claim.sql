-- Claim up to $3 jobs from queues $1 for worker $2 with a lease of $4
-- microseconds, in ONE statement.
--
-- ungrouped: per queue, the first pending jobs in claim order, row-locked
--   with SKIP LOCKED so concurrent claimers take disjoint sets and never wait.
-- grouped: for each group with pending jobs and a free slot, its oldest
--   eligible jobs (at most the free slots), taken only if they are in one
--   of our queues: a group is one ordered stream whatever queues its jobs
--   are in. The GROUP ROW is locked with SKIP LOCKED. If a concurrent claim
--   committed a bump first, PostgreSQL re-checks the newest group row
--   (running < max_running) and drops a group that is now full.
-- claimed: the chosen rows become running; "state = 'pending'" is re-checked
--   on the newest row version, so a job is never claimed twice. The ids go
--   through an array so the planner looks them up by primary key instead of
--   hash-joining the whole live table.
-- bumped: the group rows locked above count their new running jobs.
WITH RECURSIVE ungrouped AS (
    SELECT j.id, j.priority, j.run_at
    FROM unnest($1::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at
        FROM readpast_jobs
        WHERE queue = q.name AND state = 'pending' AND group_key IS NULL AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ) j
),
-- The group keys that have pending jobs, one index probe per key (a loose
-- index scan of readpast_jobs_group_claim), so groups with nothing to do
-- cost nothing however many there have been.
pending_groups (group_key) AS (
    (SELECT group_key FROM readpast_jobs
     WHERE state = 'pending' AND group_key IS NOT NULL
     ORDER BY group_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.group_key FROM readpast_jobs j
            WHERE j.state = 'pending' AND j.group_key > p.group_key
            ORDER BY j.group_key LIMIT 1)
    FROM pending_groups p
    WHERE p.group_key IS NOT NULL
),
grouped AS (
    SELECT h.id, h.priority, h.run_at
    FROM pending_groups pg
    JOIN readpast_groups g ON g.group_key = pg.group_key
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at, queue
        FROM readpast_jobs
        WHERE group_key = g.group_key AND state = 'pending' AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT g.max_running - g.running
    ) h
    WHERE g.running < g.max_running AND h.queue = ANY($1::text[])
    ORDER BY h.priority, h.run_at, h.id
    LIMIT $3
    FOR UPDATE OF g SKIP LOCKED
),
picked AS (
    SELECT id FROM (SELECT * FROM ungrouped UNION ALL SELECT * FROM grouped) c
    ORDER BY priority, run_at, id
    LIMIT $3
),
claimed AS (
    UPDATE readpast_jobs j
    SET state = 'running',
        attempt = j.attempt + 1,
        token = gen_random_uuid(),
        worker = $2,
        started_at = now(),
        lease_expires_at = now() + $4::bigint * interval '1 microsecond'
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked)) AND j.state = 'pending'
    RETURNING j.*
),
bumped AS (
    UPDATE readpast_groups g
    SET running = g.running + c.n
    FROM (SELECT group_key, count(*) AS n FROM claimed WHERE group_key IS NOT NULL GROUP BY group_key) c
    WHERE g.group_key = c.group_key
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, token::text, lease_expires_at, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb
FROM claimed
ORDER BY priority, run_at, id;
