-- Schema version 11: limits per key (docs/design/flow-control.md).
--
-- 1. readpast_limits holds the declared limits: one row per key, or per
--    template ("prefix*"). concurrency 0 means no bound; interval_us 0
--    means no rate (rate and per_us are kept as declared, to be read
--    back).
CREATE TABLE readpast_limits (
    key         text        PRIMARY KEY,
    concurrency integer     NOT NULL CHECK (concurrency BETWEEN 0 AND 10000),
    rate        integer     NOT NULL DEFAULT 0 CHECK (rate >= 0),
    per_us      bigint      NOT NULL DEFAULT 0 CHECK (per_us >= 0),
    burst       integer     NOT NULL DEFAULT 1 CHECK (burst >= 1),
    interval_us bigint      NOT NULL DEFAULT 0 CHECK (interval_us >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE readpast_limits SET (vacuum_truncate = false); -- see 0007

COMMENT ON TABLE readpast_limits IS
    'Declared limits, by key or template (prefix*); copied onto each governed key''s row of readpast_groups.';

-- 2. A key's row (readpast_groups) carries the limit that governs it, so
--    that a claim reads it from the row it locked, newest version: the
--    declared key (limit_key, NULL for the default of one at a time), its
--    rate as the time between two starts (interval_us, 0 for none) and
--    its burst, and the key's theoretical arrival time (tat: when the
--    bucket's last start would have come at the rate; NULL or past means
--    a full bucket). max_running 2147483647 is no bound.
ALTER TABLE readpast_groups
    ADD COLUMN limit_key   text,
    ADD COLUMN interval_us bigint  NOT NULL DEFAULT 0 CHECK (interval_us >= 0),
    ADD COLUMN burst       integer NOT NULL DEFAULT 1 CHECK (burst >= 1),
    ADD COLUMN tat         timestamptz;

-- Limits set before (SetGroupLimit) become declared limits of their keys.
INSERT INTO readpast_limits (key, concurrency)
SELECT group_key, max_running FROM readpast_groups WHERE max_running <> 1;
UPDATE readpast_groups SET limit_key = group_key WHERE max_running <> 1;

-- 3. readpast_key_limit(key) resolves the limit of a key whose row a
--    claim or TakeTokens is about to create: the key's own declared limit,
--    else the longest template it matches, else the default (one at a
--    time, no rate). ok is false when a PutLimit or DeleteLimit is under
--    way (its lock, 1919181686, is held exclusively): the caller then does
--    not create the row this time.
--
--    The shared lock is taken before the limits are read, and the read is
--    a query of a VOLATILE function, which under READ COMMITTED takes a
--    snapshot of its own, after the lock: a limit change either committed
--    before that snapshot (and is read), or waits for the caller's
--    transaction to end and then applies itself to the row it created.
--    The claim statement's own snapshot may be older than both.
CREATE FUNCTION readpast_key_limit(k text,
    OUT ok boolean, OUT limit_key text, OUT max_running integer,
    OUT interval_us bigint, OUT burst integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    ok := pg_try_advisory_xact_lock_shared(1919181686, 0);
    max_running := 1;
    interval_us := 0;
    burst := 1;
    IF NOT ok THEN
        RETURN;
    END IF;
    -- The key itself and every template it matches, looked up by the
    -- primary key (keys are at most 255 bytes): a plan that reads the
    -- table by its index at any size.
    SELECT l.key, CASE WHEN l.concurrency = 0 THEN 2147483647 ELSE l.concurrency END,
           l.interval_us, l.burst
    INTO limit_key, max_running, interval_us, burst
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
    END IF;
END
$$;

-- 4. The announce trigger of 0008 marks a key whose free slots went up at
--    its first free due jobs; a key out of tokens is marked at its next
--    start instead (tat - (burst - 1) intervals), so that a completion
--    does not send claims to a key that cannot start anything yet. Its
--    next start was announced by the claim that spent its tokens.
CREATE OR REPLACE FUNCTION readpast_announce_groups() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET jit = off
    AS $$
DECLARE
    due timestamptz := clock_timestamp();
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (f.group_key, j.queue) j.queue, j.priority,
           CASE WHEN f.interval_us > 0
                THEN greatest(j.run_at, f.tat - (f.burst - 1) * f.interval_us * interval '1 microsecond')
                ELSE j.run_at END,
           j.id, f.group_key
    FROM (
        SELECT group_key, max(free) FILTER (WHERE after) AS free,
               max(interval_us) FILTER (WHERE after) AS interval_us,
               max(burst) FILTER (WHERE after) AS burst,
               max(tat) FILTER (WHERE after) AS tat
        FROM (SELECT group_key, max_running - running AS free, interval_us, burst, tat, false AS after FROM old_rows
              UNION ALL
              SELECT group_key, max_running - running, interval_us, burst, tat, true FROM new_rows) r
        GROUP BY group_key
        HAVING max(free) FILTER (WHERE after) > 0
           AND max(free) FILTER (WHERE after) > max(free) FILTER (WHERE NOT after)
    ) f
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at
        FROM readpast_jobs
        WHERE group_key = f.group_key AND state = 'pending' AND run_at <= due
        ORDER BY priority, run_at, id
        LIMIT least(f.free, 64)
    ) j
    ORDER BY f.group_key, j.queue, j.priority, j.run_at, j.id;
    RETURN NULL;
END $$;
