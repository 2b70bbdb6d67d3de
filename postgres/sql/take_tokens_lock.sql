-- Before TakeTokens creates key $1's row (take_tokens_row.sql): the
-- limits' lock shared, waiting only for a PutLimit or DeleteLimit that
-- holds it, and the key's advisory lock (1919181683), which every
-- transaction inserting or deleting a key's row takes (claims try it and
-- pass the key over while this holds it).
SELECT pg_advisory_xact_lock_shared(1919181686, 0), pg_advisory_xact_lock(1919181683, hashtext($1))
