-- Take the limits' lock (advisory 1919181686, 0) shared, waiting, for a
-- limit change's transaction of one row, which holds that key's row
-- already (lock_key_row.sql): readpast_key_limit then resolves the row's
-- limit with the lock held, never with the defaults it gives when a
-- change holds the lock exclusively. It waits only for such a change,
-- which waits for no row (limit_lock.sql), or for one queued for the
-- lock, which holds nothing yet.
SELECT pg_advisory_xact_lock_shared(1919181686, 0)
