-- Declare the concurrency $2 of key $1's own limit (SetGroupLimit),
-- keeping a rate it has: read and written here, under the limits' lock
-- (limit_lock.sql), so a PutLimit of the key either commits before or
-- waits. Then apply_limit.sql.
INSERT INTO readpast_limits AS l (key, concurrency)
SELECT $1, $2
WHERE readpast_stall('limit.put', $1::text)
ON CONFLICT (key) DO UPDATE
SET concurrency = excluded.concurrency, updated_at = now()
