-- Give every key row that the limit $1 (a key, or a template "prefix*")
-- may govern the limit that governs it now. Rendered "skip" it passes
-- over the rows other transactions hold: it runs under the limits' lock,
-- which keeps claims from creating any key's row, so it waits for no
-- row; the rows it passed over exist, and are given their limit after
-- the lock is let go, by this statement rendered plain, which waits for
-- them. Every form:
--
-- may govern the limit that governs it now (readpast_key_limit, run under
-- the limits' lock that this transaction holds, reads this transaction's
-- change), and return the keys whose limit changed. Runs after
-- limit_lock.sql in a statement of its own, so it sees every row a claim
-- created before the lock was granted. It locks the rows in key order,
-- the order in which finishers take key rows, and waits for the claims
-- and finishers holding them (claims never wait for it: they pass a held
-- row over). A row's running count stays: a lowered limit preempts
-- nothing. The bucket keeps the starts it counted: a new rate rescales
-- the time they still take (tat past now) to its own interval. The trigger on
-- readpast_groups (migrations/0008) marks the keys whose free slots went
-- up; mark_keys.sql marks the rest.
WITH governed AS (
    SELECT group_key
    FROM readpast_groups
    WHERE (group_key = $1 OR (right($1, 1) = '*' AND starts_with(group_key, left($1, -1))))
      AND readpast_stall('limit.apply', group_key)
    ORDER BY group_key
    FOR UPDATE{{if .}} SKIP LOCKED{{end}}
),
resolved AS (
    SELECT g.group_key, k.*
    FROM governed g
    CROSS JOIN LATERAL readpast_key_limit(g.group_key) k
)
UPDATE readpast_groups g
SET limit_key = r.limit_key, max_running = r.max_running,
    interval_us = r.interval_us, burst = r.burst, weight = r.weight,
    tat = CASE WHEN g.interval_us > 0 AND r.interval_us > 0 AND g.interval_us <> r.interval_us
                    AND g.tat > clock_timestamp()
               THEN clock_timestamp() + ceil(extract(epoch FROM g.tat - clock_timestamp()) * 1000000
                                             * r.interval_us / g.interval_us) * interval '1 microsecond'
               ELSE g.tat END
FROM resolved r
WHERE g.group_key = r.group_key
  AND (g.limit_key, g.max_running, g.interval_us, g.burst, g.weight)
      IS DISTINCT FROM (r.limit_key, r.max_running, r.interval_us, r.burst, r.weight)
RETURNING g.group_key
