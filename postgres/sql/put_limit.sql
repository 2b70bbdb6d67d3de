-- Declare the limit of key or template $1: concurrency $2 (0: no bound),
-- rate $3 per $4 microseconds (0: none), burst $5, $6 microseconds between
-- two starts, weight $7. Reports whether it created the limit. Run under the limits'
-- lock (limit_lock.sql), then apply_limit.sql.
INSERT INTO readpast_limits AS l (key, concurrency, rate, per_us, burst, interval_us, weight)
SELECT $1, $2, $3, $4, $5, $6, $7
WHERE readpast_stall('limit.put', $1::text)
ON CONFLICT (key) DO UPDATE
SET concurrency = excluded.concurrency, rate = excluded.rate, per_us = excluded.per_us,
    burst = excluded.burst, interval_us = excluded.interval_us, weight = excluded.weight,
    updated_at = now()
RETURNING xmax = 0
