-- Schema version 13: keys' weights (docs/design/flow-control.md, "Keys
-- take turns").
--
-- 1. A limit's weight is its keys' share among the keys that take turns:
--    one claim takes up to weight jobs of a key in each of its rounds. A
--    key's row carries the weight that governs it, as it carries the rest
--    of its limit, so that a claim reads it from the row it locked. The
--    key rows' column has no CHECK: adding one would scan the table under
--    the ALTER's exclusive lock, and every claim would wait for it; the
--    weights come from readpast_limits, which checks them.
ALTER TABLE readpast_limits
    ADD COLUMN weight integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 100);
ALTER TABLE readpast_groups
    ADD COLUMN weight integer NOT NULL DEFAULT 1;

-- 2. readpast_key_limit (0011) resolves the weight too. Its result type
--    changes, so it is made anew; what it does is unchanged: the limits'
--    lock taken shared without waiting, then the limits read with a
--    snapshot of its own.
DROP FUNCTION readpast_key_limit(text);

CREATE FUNCTION readpast_key_limit(k text,
    OUT ok boolean, OUT limit_key text, OUT max_running integer,
    OUT interval_us bigint, OUT burst integer, OUT weight integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    ok := pg_try_advisory_xact_lock_shared(1919181686, 0);
    max_running := 1;
    interval_us := 0;
    burst := 1;
    weight := 1;
    IF NOT ok THEN
        RETURN;
    END IF;
    -- The key itself and every template it matches, looked up by the
    -- primary key (keys are at most 255 bytes): a plan that reads the
    -- table by its index at any size.
    SELECT l.key, CASE WHEN l.concurrency = 0 THEN 2147483647 ELSE l.concurrency END,
           l.interval_us, l.burst, l.weight
    INTO limit_key, max_running, interval_us, burst, weight
    FROM readpast_limits l
    WHERE l.key = ANY (ARRAY(
        SELECT k UNION ALL
        SELECT left(k, n) || '*' FROM generate_series(0, length(k)) AS n))
    ORDER BY l.key = k DESC, length(l.key) DESC
    LIMIT 1;
    IF NOT FOUND THEN
        limit_key := NULL;
        max_running := 1;
        interval_us := 0;
        burst := 1;
        weight := 1;
    END IF;
END
$$;
