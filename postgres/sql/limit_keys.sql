-- Up to $2 key rows governed by each of the declared limits $1, by limit
-- and key, with the database's clock to judge their buckets by. A key's
-- running count is its row's less the freed-slot counts not yet folded
-- into it (migrations/0022).
SELECT l.key, g.group_key,
       g.running - coalesce((SELECT sum(f.n) FROM readpast_key_freed f WHERE f.group_key = g.group_key), 0)::integer,
       g.max_running, g.interval_us, g.burst, g.tat,
       clock_timestamp()
FROM unnest($1::text[]) AS l(key)
CROSS JOIN LATERAL (
    SELECT group_key, running, max_running, interval_us, burst, tat
    FROM readpast_groups
    WHERE limit_key = l.key
    ORDER BY group_key
    LIMIT $2
) g
ORDER BY l.key, g.group_key
