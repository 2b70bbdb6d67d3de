-- Give every key row that the limit $1 (a key, or a template "prefix*")
-- may govern the limit that governs it now (readpast_key_limit, run under
-- the limits' lock that this transaction holds, reads this transaction's
-- change), and return the keys whose limit changed. Runs after
-- limit_lock.sql in a statement of its own, so it sees every row a claim
-- created before the lock was granted. It locks the rows in key order,
-- the order in which finishers take key rows, and waits for the claims
-- and finishers holding them (claims never wait for it: they pass a held
-- row over). A row's running count and tat stay: a lowered limit preempts
-- nothing, and the bucket keeps the starts it counted. The trigger on
-- readpast_groups (migrations/0008) marks the keys whose free slots went
-- up; mark_keys.sql marks the rest.
WITH governed AS (
    SELECT group_key
    FROM readpast_groups
    WHERE (group_key = $1 OR (right($1, 1) = '*' AND starts_with(group_key, left($1, -1))))
      AND readpast_stall('limit.apply', group_key)
    ORDER BY group_key
    FOR UPDATE
),
resolved AS (
    SELECT g.group_key, k.*
    FROM governed g
    CROSS JOIN LATERAL readpast_key_limit(g.group_key) k
)
UPDATE readpast_groups g
SET limit_key = r.limit_key, max_running = r.max_running,
    interval_us = r.interval_us, burst = r.burst
FROM resolved r
WHERE g.group_key = r.group_key
  AND (g.limit_key, g.max_running, g.interval_us, g.burst)
      IS DISTINCT FROM (r.limit_key, r.max_running, r.interval_us, r.burst)
RETURNING g.group_key
