-- Schema version 23: a slot freed on a key that was full and is out of
-- tokens announces the key's next start (docs/design/flow-control.md,
-- "Wake-ups").
--
-- The announce trigger marks such a key's next jobs at its next start,
-- and nothing else wakes anybody then: the key's last token may have
-- gone to TakeTokens, to a claim of another process, or to a job that
-- names the key after its first; its rate may have been lowered; a
-- process may have started listening after the claim that filled it.
-- So the trigger now also sends NOTIFY readpast with "due:" payloads
-- listing those marks' times (Unix microseconds, 256 a NOTIFY), which
-- PostgreSQL delivers when the statement's transaction commits (a
-- caller's held-open transaction included), and every listening store
-- sets an alarm for each (postgres/due.go). A transaction that notifies
-- takes PostgreSQL's notify lock at its commit, which serializes the
-- commits of notifying transactions: only a statement that frees a slot
-- of a key both full and out of tokens pays it.
CREATE OR REPLACE FUNCTION readpast_announce_groups() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off
    SET jit = off
    AS $$
DECLARE
    due timestamptz := clock_timestamp();
    payloads text[];
    later text;
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    WITH marked AS (
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
    ORDER BY f.group_key, j.queue, j.priority, j.run_at, j.id
    RETURNING run_at, group_key
    )
    SELECT array_agg(p ORDER BY chunk) INTO payloads
    FROM (
        SELECT chunk, 'due:' || string_agg(t::text, ',' ORDER BY t) AS p
        FROM (
            SELECT t, (row_number() OVER (ORDER BY t) - 1) / 256 AS chunk
            FROM (
                SELECT DISTINCT (extract(epoch FROM m.run_at) * 1000000)::bigint AS t
                FROM marked m
                WHERE m.run_at > due
                  AND EXISTS (SELECT FROM old_rows o
                              WHERE o.group_key = m.group_key AND o.max_running - o.running <= 0)
            ) d
        ) c
        GROUP BY chunk
    ) w;
    FOREACH later IN ARRAY coalesce(payloads, '{}') LOOP
        PERFORM pg_notify('readpast', later);
    END LOOP;
    IF NOT EXISTS (SELECT FROM old_rows WHERE waiters IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (w.key, j.queue) j.queue, j.priority, readpast_turn(w.key, j.run_at), j.id, w.key
    FROM (
        SELECT DISTINCT unnest(o.waiters) AS key
        FROM old_rows o JOIN new_rows n USING (group_key)
        WHERE o.waiters IS NOT NULL
          AND n.max_running - n.running > 0
          AND n.max_running - n.running > o.max_running - o.running
    ) w
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at
        FROM readpast_jobs
        WHERE group_key = w.key AND state = 'pending' AND run_at <= due
        ORDER BY priority, run_at, id
        LIMIT 64
    ) j
    ORDER BY w.key, j.queue, j.priority, j.run_at, j.id;
    RETURN NULL;
END $$;
