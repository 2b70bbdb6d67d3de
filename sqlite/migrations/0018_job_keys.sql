-- readpast schema version 18 for SQLite: jobs with several keys, as on
-- PostgreSQL (postgres/migrations/0021_more_keys.sql;
-- docs/design/flow-control.md, "Jobs with several keys").
--
-- 1. A job's keys after the first (its group, group_key) are more_keys, a
--    JSON array of names, on the live and the finished rows; NULL for a
--    job with one key or none.
ALTER TABLE readpast_jobs ADD COLUMN more_keys TEXT;
ALTER TABLE readpast_history ADD COLUMN more_keys TEXT;

-- 2. A key's row keeps the first keys that wait for it (waiters, a JSON
--    array of names; NULL for none): keys whose jobs a claim could not
--    take because this key was full, and that the claim therefore left
--    without a ready mark. The claim writes them (keys.go); whatever frees
--    a slot of the key or changes its limit takes them and marks each at
--    its first due jobs. Only a full key has waiters, so only a row with
--    running jobs, which retention never deletes.
ALTER TABLE readpast_groups ADD COLUMN waiters TEXT;

-- 3. The resolution trigger of version 16, whose cascade moves the jobs it
--    cancels to history with their more_keys. Nothing else changes.
DROP TRIGGER readpast_jobs_resolve_edges;
CREATE TRIGGER readpast_jobs_resolve_edges AFTER DELETE ON readpast_jobs
WHEN OLD.has_children
BEGIN
    UPDATE readpast_jobs
    SET waiting_on = waiting_on - s.n,
        state = CASE WHEN waiting_on = s.n THEN 'pending' ELSE state END,
        run_at = CASE WHEN waiting_on = s.n
            THEN max(run_at, coalesce((SELECT finished_at FROM readpast_history WHERE id = OLD.id),
                                      CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)))
            ELSE run_at END
    FROM (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d CROSS JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT child_id, count(*) AS n FROM (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND (
                (e.state IN ('open', 'held')
                 AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS 'succeeded')
                OR (e.state = 'open' AND e.policy = 'run_anyway'))
            UNION ALL
            SELECT e.child_id FROM d CROSS JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'run_anyway')
        GROUP BY child_id) AS s
    WHERE readpast_jobs.id = s.child_id AND readpast_jobs.state = 'blocked';

    INSERT INTO readpast_history (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
        lease_expires_at, worker, group_key, created_at, started_at, errors, finished_at, result,
        unique_key, unique_until, tags, snoozes, more_keys)
    WITH RECURSIVE dd(id, depth) AS (
        SELECT e.child_id, 1 FROM readpast_edges e
        WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
          AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
        UNION
        SELECT e.child_id, dd.depth + 1 FROM dd CROSS JOIN readpast_edges e
        ON e.parent_id = dd.id AND e.state = 'open' AND e.policy = 'cancel_child'),
    d(id, depth) AS (SELECT id, min(depth) FROM dd GROUP BY id),
    named(id, parent) AS (
        SELECT child_id, parent FROM (
            SELECT x.child_id, x.parent_id AS parent,
                   row_number() OVER (PARTITION BY x.child_id ORDER BY p.depth, x.parent_id) AS rn
            FROM (SELECT OLD.id AS id, 0 AS depth UNION ALL SELECT id, depth FROM d) AS p
            JOIN readpast_edges x ON x.parent_id = p.id AND x.state = 'open' AND x.policy = 'cancel_child')
        WHERE rn = 1)
    SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, 'cancelled', j.attempt, j.max_attempts, j.token,
        NULL, j.worker, j.group_key, j.created_at, j.started_at,
        json_insert(j.errors, '$[#]', json_object(
            'attempt', j.attempt,
            'at', strftime('%Y-%m-%dT%H:%M:%S', p.at / 1000000, 'unixepoch') || printf('.%06dZ', p.at % 1000000),
            'message', CASE WHEN n.parent = OLD.id
                THEN printf('parent job %d %s', OLD.id, CASE p.outcome WHEN 'failed' THEN 'failed' ELSE 'was cancelled' END)
                ELSE printf('parent job %d was cancelled', n.parent)
                END)),
        p.at, NULL, j.unique_key, j.unique_until, j.tags, j.snoozes, j.more_keys
    FROM (SELECT coalesce(h.state, 'cancelled') AS outcome,
                 coalesce(h.finished_at, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)) AS at
          FROM (SELECT 1) LEFT JOIN readpast_history h ON h.id = OLD.id) AS p
    JOIN d
    JOIN readpast_jobs j ON j.id = d.id AND j.state = 'blocked'
    JOIN named n ON n.id = j.id
    ORDER BY j.id;

    -- The edges of the cancelled but their cancel_child ones (which lead
    -- to the cancelled, and are resolved by their deletes).
    UPDATE readpast_edges
    SET state = CASE WHEN policy = 'hold_child' THEN 'held' ELSE 'done' END
    WHERE state = 'open' AND policy <> 'cancel_child' AND parent_id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d CROSS JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    UPDATE readpast_jobs SET has_children = 0
    WHERE has_children AND state = 'blocked' AND id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d CROSS JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    DELETE FROM readpast_jobs WHERE state = 'blocked' AND id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d CROSS JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    -- The parent's own edges (its cancel_child ones are done already).
    UPDATE readpast_edges
    SET state = CASE
        WHEN (SELECT state FROM readpast_history WHERE id = OLD.id) IS 'succeeded' THEN 'done'
        WHEN policy = 'hold_child' THEN 'held'
        ELSE 'done' END
    WHERE parent_id = OLD.id AND state IN ('open', 'held')
      AND NOT (state = 'held' AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded');
END;
