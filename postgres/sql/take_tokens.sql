-- Take $2 starts from the bucket of key $1, all or none, on the
-- database's clock, as a claim's starts do (sql/claim.sql). Runs after
-- take_tokens_row.sql made sure the key has a row, in a transaction of
-- its own (no row: the row was pruned meanwhile, and TakeTokens creates
-- it again); locks the row FOR NO KEY UPDATE, as a claim does (waiting
-- for a claim or a finisher that writes it), holding no other lock. Returns whether it granted them, when they could be
-- otherwise, and the bucket's burst and interval.
WITH t AS (
    SELECT clock_timestamp() AS at
),
k AS (
    SELECT g.group_key, g.interval_us, g.burst, greatest(g.tat, t.at) AS base, t.at
    FROM readpast_groups g, t
    WHERE g.group_key = $1
    FOR NO KEY UPDATE OF g
),
d AS (
    SELECT *, interval_us = 0
              OR base + ($2 - burst) * interval_us * interval '1 microsecond' <= at AS granted
    FROM k
),
taken AS (
    UPDATE readpast_groups g
    SET tat = d.base + $2 * d.interval_us * interval '1 microsecond'
    FROM d
    WHERE g.group_key = d.group_key AND d.granted AND d.interval_us > 0
)
SELECT granted,
       CASE WHEN NOT granted THEN base + ($2 - burst) * interval_us * interval '1 microsecond' END,
       burst, interval_us
FROM d
