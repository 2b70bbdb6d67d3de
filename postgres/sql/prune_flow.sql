-- Delete the flow of job $1 if all of it may go, and return the flow's
-- job ids (up to $2 + 1) and how many jobs were deleted (0 or all of
-- them).
--
-- A flow is the jobs joined by the edges one EnqueueFlow call stored
-- (their parent_ref set), or a batch: the members' edges into a
-- finishing job that has a seal edge (from its id negated); see
-- flow_retention.sql. An edge to a job stored earlier joins nothing.
--
-- It may go when it has at most $2 jobs, and every one is ripe: in
-- history, finished before the cutoff of its state ($3 succeeded, $4
-- failed, $5 cancelled; NULL keeps that state's jobs, and their flows),
-- past its unique key's period, holding back no blocked child
-- (holds_no_child) and with no live child in another flow (which reads
-- its parents' results when it runs). A larger flow is kept: it is
-- deleted by hand.
--
-- The flow is walked and checked on the statement's snapshot; only a flow
-- that passes takes locks. Its history rows are locked in id order, SKIP
-- LOCKED, and then the history rows of its children in other flows, FOR
-- KEY SHARE SKIP LOCKED: a job of the flow retried since (its history row
-- gone), or held by another transaction (a retry, a delete, another
-- prune), or a child in another flow retried since or being retried,
-- leaves fewer rows locked than the snapshot has, and nothing is deleted.
-- Finished jobs gain no edges (a flow's parents and a batch's finishing
-- job must be live to), so the walk misses no member and no child. History
-- rows first, then key rows, as retry takes them.
WITH RECURSIVE flow(id) AS (
    SELECT $1::bigint
    UNION
    SELECT n.id FROM flow, LATERAL (
        SELECT e.child_id AS id FROM readpast_edges e
        WHERE e.parent_id = flow.id AND {{template "joins_child"}}
        UNION ALL
        SELECT e.parent_id FROM readpast_edges e
        WHERE e.child_id = flow.id AND {{template "joins_parent" "flow.id"}}
    ) n
),
walked AS (
    SELECT array_agg(id ORDER BY id) AS ids FROM (SELECT id FROM flow LIMIT $2 + 1) w
),
-- The children of the flow's jobs in other flows, on the snapshot: live
-- ones keep the flow; those in history are locked below.
outside AS (
    SELECT DISTINCT d.child_id AS id, h.id IS NOT NULL AS finished
    FROM readpast_edges d LEFT JOIN readpast_jobs_history h ON h.id = d.child_id
    WHERE d.parent_id = ANY ((SELECT ids FROM walked)::bigint[])
      AND d.child_id <> ALL ((SELECT ids FROM walked)::bigint[])
      AND (h.id IS NOT NULL OR EXISTS (SELECT 1 FROM readpast_jobs c WHERE c.id = d.child_id))
),
seen AS (
    SELECT cardinality((SELECT ids FROM walked)) <= $2
       AND NOT EXISTS (SELECT 1 FROM outside WHERE NOT finished)
       AND (SELECT count(*) FROM readpast_jobs_history h
            WHERE h.id = ANY ((SELECT ids FROM walked)::bigint[])
              AND {{template "ripe_job" "h.id"}}
              AND {{template "holds_no_child" "h.id"}}) = cardinality((SELECT ids FROM walked)) AS ok
),
locked AS (
    SELECT h.id
    FROM readpast_jobs_history h
    WHERE (SELECT ok FROM seen)
      AND h.id = ANY ((SELECT ids FROM walked)::bigint[]) AND readpast_stall('prune.flow', h.id)
    ORDER BY h.id
    FOR UPDATE SKIP LOCKED
),
locked_outside AS (
    SELECT h.id
    FROM readpast_jobs_history h
    WHERE (SELECT count(*) FROM locked) > 0
      AND h.id IN (SELECT id FROM outside)
    ORDER BY h.id
    FOR KEY SHARE SKIP LOCKED
),
-- Checked on the snapshot (seen); what the locks add is that no row
-- walked, and no child in another flow, has gone or is held meanwhile.
ripe AS (
    SELECT (SELECT count(*) FROM locked) = cardinality((SELECT ids FROM walked))
       AND (SELECT count(*) FROM locked_outside) = (SELECT count(*) FROM outside) AS ok
),
gone AS (
    DELETE FROM readpast_jobs_history h
    USING locked l
    WHERE h.id = l.id AND (SELECT ok FROM ripe)
    RETURNING h.id, h.unique_key, h.tags
),
{{template "drop_history_rows"}}
SELECT (SELECT ids FROM walked), (SELECT count(*) FROM gone)
