-- Job counts per queue and state, live and finished: the folded counts
-- plus the deltas not yet folded in (see migration 0004). Costs the same
-- however many jobs there are.
SELECT queue, state, sum(n)::bigint
FROM (
    SELECT queue, state, n FROM readpast_counts
    UNION ALL
    SELECT queue, state, n FROM readpast_count_deltas
) c
GROUP BY queue, state
HAVING sum(n) <> 0
ORDER BY 1, 2;
