-- Delete up to $1 rows of idle keys: nothing running and a full bucket
-- (no rate, or its theoretical arrival time past), which is what a
-- missing row means, and no turn to keep (no job waiting that is due
-- before the turn, and none at all when jobs were taken in the turn,
-- turn_used, which a row created again would start over): the claim that creates the row again gives it the limit that
-- governs the key then (readpast_key_limit). Rows another transaction
-- holds are skipped, and so are keys whose try-lock another transaction
-- holds (a claim creating the row, SetGroupLimit): an INSERT of a key
-- whose row is being deleted would wait for this statement. Ready marks
-- stay: the next claim that walks one creates the row again. The store
-- runs it under a lock_timeout (postgres/control.go): PostgreSQL, locking
-- a row version that a transaction has just replaced, waits for the
-- holder of the newer version despite SKIP LOCKED, and claims pass over
-- the rows this statement holds meanwhile.
WITH idle AS (
    SELECT group_key FROM readpast_groups
    WHERE running = 0 AND (tat IS NULL OR tat <= now()) AND waiters IS NULL
      AND (turn_used = 0 OR NOT EXISTS (
          SELECT 1 FROM readpast_jobs j
          WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending'))
      AND (served_at IS NULL OR NOT EXISTS (
          SELECT 1 FROM readpast_jobs j
          WHERE j.group_key = readpast_groups.group_key AND j.state = 'pending' AND j.run_at < readpast_groups.served_at))
      AND readpast_stall('prune.rows', group_key)
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
gated AS (
    SELECT group_key FROM idle
    WHERE pg_try_advisory_xact_lock(1919181683, hashtext(group_key))
)
DELETE FROM readpast_groups g
USING gated
WHERE g.group_key = gated.group_key
RETURNING readpast_stall('prune.end', g.group_key);
