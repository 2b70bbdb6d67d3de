-- The $1 keys with the most live jobs in queue $2 ('' = every queue),
-- with how many of those run and the key's limit (no row in
-- readpast_groups means 1). A job counts under each of its keys: its
-- group, counted per group as before, and its more_keys, counted apart
-- over the jobs that have them (unnesting every job's keys instead costs
-- about twice as much at a million jobs). Reads the live table; locks
-- nothing.
SELECT l.group_key, l.running, l.pending, coalesce(g.max_running, 1)
FROM (
    SELECT k.group_key, sum(k.running)::bigint AS running, sum(k.pending)::bigint AS pending
    FROM (
        SELECT group_key,
               count(*) FILTER (WHERE state = 'running') AS running,
               count(*) FILTER (WHERE state = 'pending') AS pending
        FROM readpast_jobs
        WHERE group_key IS NOT NULL AND ($2 = '' OR queue = $2)
        GROUP BY group_key
        UNION ALL
        SELECT m.key,
               count(*) FILTER (WHERE j.state = 'running'),
               count(*) FILTER (WHERE j.state = 'pending')
        FROM readpast_jobs j CROSS JOIN LATERAL unnest(j.more_keys) AS m(key)
        WHERE j.more_keys IS NOT NULL AND ($2 = '' OR j.queue = $2)
        GROUP BY m.key
    ) k
    GROUP BY k.group_key
    ORDER BY sum(k.running) + sum(k.pending) DESC, k.group_key
    LIMIT $1
) l
LEFT JOIN readpast_groups g ON g.group_key = l.group_key
ORDER BY l.running + l.pending DESC, l.group_key;
