-- Make sure key $1 has a row, with the limit that governs it. Runs after
-- take_tokens_lock.sql took the limits' lock (shared) and the key's
-- advisory lock, in a statement of its own, so readpast_key_limit reads
-- every limit change that committed before (a later one waits for this
-- transaction), and the INSERT never waits on another's uncommitted row
-- of the same key.
INSERT INTO readpast_groups (group_key, running, max_running, interval_us, burst, weight, limit_key)
SELECT $1, 0, k.max_running, k.interval_us, k.burst, k.weight, k.limit_key
FROM readpast_key_limit($1) k
WHERE k.ok
ON CONFLICT (group_key) DO NOTHING
