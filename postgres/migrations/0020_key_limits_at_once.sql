-- Schema version 20: a claim resolves the limits of the keys whose rows
-- it creates in one call (readpast_key_limits), not one call a key, and
-- creates only rows that are still missing when it holds their keys'
-- try-locks.
--
-- readpast_key_limit (migrations/0011, 0013) runs its lookup as a
-- statement of its own for each key, planned again at each call: about
-- 50 us a key inside a claim, 5 ms of a claim that creates the rows of
-- 100 keys. readpast_key_limits takes the same shared try-lock on the
-- limits once and looks every key up in one statement, with a snapshot of
-- its own taken after the lock, as readpast_key_limit does: a key whose
-- limit a PutLimit or DeleteLimit is changing is passed over (here: every
-- key, since the lock is one for all limits). For each key it returns the
-- key's own declared limit, else the longest template it matches, else
-- the default (one at a time, no rate, weight 1). With no keys it takes
-- no lock. readpast_key_limit stays, for TakeTokens and PutLimit.
--
-- It returns only the keys that have no row in its own snapshot (looked
-- up by the primary key for the keys given, so that the plan, made once,
-- never reads the whole index). The
-- caller holds each key's try-lock (1919181683), which every transaction
-- that inserts or deletes a key's row takes, so a key without a row here
-- gets none before the caller's INSERT. A key whose row another claim
-- created and committed after the caller's snapshot is left out: the
-- caller's INSERT ... ON CONFLICT would otherwise find that row and, if a
-- third transaction has updated it and is still open (a claim, a
-- finisher, PutLimit), wait for that transaction, and a claim never waits
-- (TestClaimCreatingAKeyRowNeverWaitsOnItsUpdate).
CREATE FUNCTION readpast_key_limits(keys text[])
RETURNS TABLE (group_key text, limit_key text, max_running integer,
               interval_us bigint, burst integer, weight integer)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(keys) = 0 OR NOT pg_try_advisory_xact_lock_shared(1919181686, 0) THEN
        RETURN;
    END IF;
    -- Each key and every template it matches, looked up by the primary
    -- key (keys are at most 255 bytes): a plan that reads the table by
    -- its index at any size.
    RETURN QUERY
    SELECT k.key, l.key,
           coalesce(CASE WHEN l.concurrency = 0 THEN 2147483647 ELSE l.concurrency END, 1),
           coalesce(l.interval_us, 0::bigint), coalesce(l.burst, 1), coalesce(l.weight, 1)
    FROM unnest(keys) AS k(key)
    LEFT JOIN LATERAL (
        SELECT l.key, l.concurrency, l.interval_us, l.burst, l.weight
        FROM readpast_limits l
        WHERE l.key = ANY (ARRAY(
            SELECT k.key UNION ALL
            SELECT left(k.key, n) || '*' FROM generate_series(0, length(k.key)) AS n))
        ORDER BY l.key = k.key DESC, length(l.key) DESC
        LIMIT 1
    ) l ON true
    WHERE k.key <> ALL (ARRAY(SELECT g.group_key FROM readpast_groups g WHERE g.group_key = ANY (keys)));
END
$$;
