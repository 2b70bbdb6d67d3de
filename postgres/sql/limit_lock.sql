-- Take the limits' lock (advisory 1919181686, 0) exclusively, for a
-- PutLimit or DeleteLimit, until its transaction ends. Claims and
-- TakeTokens take it shared, without waiting for it, only while they
-- create a key's row (readpast_key_limit, migrations/0011_limits.sql),
-- so this waits at most for claim statements that are creating rows, and
-- a claim that meets it creates no row this time. Run as a statement of
-- its own: the statements after it read every row those claims created.
SELECT pg_advisory_xact_lock(1919181686, 0)
