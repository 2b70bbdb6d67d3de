-- One batch of BulkDelete (and Delete, $8 holding its one id): the
-- finished jobs among the ids of the walk (the bulk_scan fragment; its
-- parameters $1..$8) that still match the filters are deleted with their
-- tag rows, their edges and, as prune.sql does, the unique keys they
-- still hold. A job that holds back a blocked child (holds_no_child) is
-- neither deleted nor passed over: Delete explains.
--
-- Rendered "wait" (postgres/bulk.go, for the ids still held after the
-- rounds), the rows are locked FOR UPDATE, waiting, one job at a time,
-- under a lock_timeout: a claim never waits on it, since claims skip
-- locked rows and the statement holds no job row while it waits.
--
-- History rows are locked FOR UPDATE SKIP LOCKED in id order (a retry or
-- another delete holding one: passed over, returned, tried again by the
-- store after the walk), then key rows; tag rows are only ever written by
-- enqueue, for fresh ids, so deleting them waits on nobody. It touches no
-- live row and no group row: claims never wait on it.
--
-- Returns how many it deleted, the walk's last id (NULL: the walk is
-- over), the ids it passed over, and NULL (bulk_cancel.sql returns groups
-- there).
WITH {{template "bulk_scan" "readpast_jobs_history"}},
target AS (
    SELECT id FROM readpast_jobs_history
    WHERE id = ANY (ARRAY(SELECT id FROM scan))
      AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR state = $3)
      AND ($5 = '' OR group_key = $5)
      AND {{template "holds_no_child" "readpast_jobs_history.id"}}
    ORDER BY id
    FOR UPDATE{{if not .}} SKIP LOCKED{{end}}
),
gone AS (
    DELETE FROM readpast_jobs_history h
    WHERE h.id = ANY (ARRAY(SELECT id FROM target))
    RETURNING h.id, h.unique_key, h.tags
),
{{template "drop_history_rows"}}
SELECT (SELECT count(*) FROM gone),
       (SELECT max(id) FROM scan),
       ARRAY(SELECT s.id FROM scan s
             WHERE s.id NOT IN (SELECT id FROM target)
               AND EXISTS (SELECT 1 FROM readpast_jobs_history h WHERE h.id = s.id
                             AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
                             AND ($3 = '' OR state = $3) AND ($5 = '' OR group_key = $5)
                             AND {{template "holds_no_child" "h.id"}})),
       NULL::text[];
