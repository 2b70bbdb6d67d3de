-- Delete the limit declared for $1. Run under the limits' lock
-- (limit_lock.sql), then apply_limit.sql.
DELETE FROM readpast_limits WHERE key = $1
