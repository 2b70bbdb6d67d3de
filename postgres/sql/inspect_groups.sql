-- The $1 concurrency groups with the most live jobs in queue $2 ('' =
-- every queue), with how many of those run and the group's limit (no row
-- in readpast_groups means 1). Reads the live table; locks nothing.
SELECT l.group_key, l.running, l.pending, coalesce(g.max_running, 1)
FROM (
    SELECT group_key,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'pending') AS pending
    FROM readpast_jobs
    WHERE group_key IS NOT NULL AND ($2 = '' OR queue = $2)
    GROUP BY group_key
    ORDER BY count(*) DESC, group_key
    LIMIT $1
) l
LEFT JOIN readpast_groups g ON g.group_key = l.group_key
ORDER BY l.running + l.pending DESC, l.group_key;
