-- The limits declared for the keys $1 (all of them when $1 is NULL), by
-- key.
SELECT key, concurrency, rate, per_us, burst, weight
FROM readpast_limits
WHERE $1::text[] IS NULL OR key = ANY ($1)
ORDER BY key
