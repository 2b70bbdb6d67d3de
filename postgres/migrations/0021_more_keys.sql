-- Schema version 21: jobs with several keys (docs/design/flow-control.md,
-- "Jobs with several keys").
--
-- 1. A job's keys after the first (its group) are more_keys, on the live
--    and the finished rows; NULL for a job with one key or none.
ALTER TABLE readpast_jobs ADD COLUMN more_keys text[];
ALTER TABLE readpast_jobs_history ADD COLUMN more_keys text[];

-- 2. A key's row keeps the first keys that wait for it (waiters): keys
--    whose jobs a claim could not take because this key was full, and
--    that the claim therefore left without a ready mark. Written by the
--    claim that held this row locked; cleared by the statement that frees
--    a slot of it (fragments/free_slots.sql), which locks the row and so
--    reads the newest waiters whatever its snapshot. The announce trigger
--    below marks the waiters of every row whose free slots went up.
ALTER TABLE readpast_groups ADD COLUMN waiters text[];

-- 3. The announce trigger (0012) also marks the waiters of each key whose
--    free slots went up, at their first due pending jobs per queue, at
--    their turn (readpast_turn). Marks are hints: a waiter whose jobs
--    still cannot start costs the next claim one look, and waits again.
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

-- 4. readpast_fit_keys decides, for a claim whose candidate jobs name more
--    than one key, which of them it takes: cands is the candidates in
--    claim order, each [id, first key (null: no key), [more keys] or
--    null]; budgets the jobs each key the claim holds may still start
--    (its free slots, its tokens and the claim's limit, whichever is
--    least). A job is taken when every key it names has budget left,
--    which it then uses one of; a job without keys always is; at most lim
--    are taken. It returns the jobs taken (blocked_by NULL) and those
--    passed over with the first of their keys that had none left, in
--    claim order, up to the last job taken. A claim whose candidates name
--    one key each never calls it (claim.sql, picked).
CREATE FUNCTION readpast_fit_keys(cands jsonb, budgets jsonb, lim integer)
RETURNS TABLE (id bigint, blocked_by text)
LANGUAGE plpgsql AS $$
DECLARE
    budget jsonb := coalesce(budgets, '{}');
    taken integer := 0;
    c jsonb;
    ks text[];
    k text;
    short text;
BEGIN
    FOR c IN SELECT e.value FROM jsonb_array_elements(coalesce(cands, '[]')) WITH ORDINALITY e ORDER BY e.ordinality LOOP
        EXIT WHEN taken >= lim;
        short := NULL;
        IF c ->> 1 IS NOT NULL THEN
            ks := ARRAY[c ->> 1] || ARRAY(
                SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(c -> 2) = 'array' THEN c -> 2 ELSE '[]' END));
            FOREACH k IN ARRAY ks LOOP
                IF coalesce((budget ->> k)::integer, 0) <= 0 THEN
                    short := k;
                    EXIT;
                END IF;
            END LOOP;
            IF short IS NULL THEN
                FOREACH k IN ARRAY ks LOOP
                    budget := jsonb_set(budget, ARRAY[k], to_jsonb((budget ->> k)::integer - 1));
                END LOOP;
            END IF;
        END IF;
        id := (c ->> 0)::bigint;
        blocked_by := short;
        IF short IS NULL THEN
            taken := taken + 1;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
