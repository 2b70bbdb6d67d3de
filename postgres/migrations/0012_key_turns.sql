-- Keys take turns (docs/design/flow-control.md, "Turns").
--
-- 1. A key's row keeps when a claim last took jobs of it (served_at, the
--    claim's time; NULL: never, or not since the row was created). A
--    key's turn in claim order is the later of its first job's run_at and
--    served_at, so within one priority a key with a backlog that was just
--    served goes behind the keys that have waited since before.
ALTER TABLE readpast_groups ADD COLUMN served_at timestamptz;

-- 2. readpast_turn(key, run_at) is where a job of key due at run_at takes
--    its place: the later of run_at and the key's served_at. Every
--    statement that writes a ready mark other than the claim and the
--    announce trigger (which hold the key's row) puts it there, reading
--    the row without a lock: a served_at read before a claim moved it on
--    puts the mark earlier than the key's turn, which costs the key's
--    rivals at most the one claim that uses the mark up and marks the key
--    again at its turn. The claim orders a key's jobs by the turn it reads
--    from the key's row as locked.
CREATE FUNCTION readpast_turn(key text, run_at timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT greatest(run_at, (SELECT served_at FROM readpast_groups WHERE group_key = key))
$$;

-- 3. The announce trigger (0011) marks a key whose free slots went up at
--    its turn: the later of its first free due job's run_at, the time it
--    was last served and, for a key out of tokens, its next start.
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
           greatest(j.run_at, f.served_at,
                    CASE WHEN f.interval_us > 0
                         THEN f.tat - (f.burst - 1) * f.interval_us * interval '1 microsecond' END),
           j.id, f.group_key
    FROM (
        SELECT group_key, max(free) FILTER (WHERE after) AS free,
               max(interval_us) FILTER (WHERE after) AS interval_us,
               max(burst) FILTER (WHERE after) AS burst,
               max(tat) FILTER (WHERE after) AS tat,
               max(served_at) FILTER (WHERE after) AS served_at
        FROM (SELECT group_key, max_running - running AS free, interval_us, burst, tat, served_at, false AS after FROM old_rows
              UNION ALL
              SELECT group_key, max_running - running, interval_us, burst, tat, served_at, true FROM new_rows) r
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
