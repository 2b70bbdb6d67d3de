-- The $1 keys with the most live jobs in queue $2 ('' = every queue),
-- with how many of those run and the key's limit (no row in
-- readpast_groups means 1). A job counts under each of its keys: its
-- group and its more_keys. Reads the live table; locks nothing.
SELECT l.group_key, l.running, l.pending, coalesce(g.max_running, 1)
FROM (
    SELECT k.key AS group_key,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           count(*) FILTER (WHERE j.state = 'pending') AS pending
    FROM readpast_jobs j
    CROSS JOIN LATERAL unnest(array_prepend(j.group_key, coalesce(j.more_keys, '{}'))) AS k(key)
    WHERE j.group_key IS NOT NULL AND ($2 = '' OR j.queue = $2)
    GROUP BY k.key
    ORDER BY count(*) DESC, k.key
    LIMIT $1
) l
LEFT JOIN readpast_groups g ON g.group_key = l.group_key
ORDER BY l.running + l.pending DESC, l.group_key;
