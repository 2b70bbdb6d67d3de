-- Take the limits' lock (advisory 1919181686, 0) exclusively, for a
-- PutLimit or DeleteLimit, until its transaction ends. Claims and
-- TakeTokens take it shared, without waiting for it, only while they
-- create a key's row (readpast_key_limit, migrations/0011_limits.sql),
-- and TakeTokens' statements creating a row, so this waits for no more;
-- a claim that meets it creates no row this time. The transaction that
-- holds it waits for no row (apply_limit.sql rendered "skip"). Run as a
-- statement of its own: the statements after it read every row those
-- claims created.
SELECT pg_advisory_xact_lock(1919181686, 0)
