-- Delete up to $1 rows of idle groups at the default limit (running 0,
-- limit 1): a missing row means exactly that. Rows another transaction
-- holds are skipped, and so are keys whose try-lock another transaction
-- holds (a claim creating the row, SetGroupLimit): an INSERT of a key whose
-- row is being deleted would wait for this statement. Ready marks stay:
-- the next claim that walks one creates the row again.
WITH idle AS (
    SELECT group_key FROM readpast_groups
    WHERE running = 0 AND max_running = 1
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
