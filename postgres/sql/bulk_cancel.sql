-- One batch of BulkCancel: the pending and running jobs among the ids of
-- the walk (the bulk_scan fragment; its parameters $1..$8) that still
-- match the filters move to history as cancelled, as cancel.sql does for
-- one: a running job's token stops being current (its row leaves the live
-- table), its group slot is freed and the group's next jobs marked, and
-- its unique key released (release_keys).
--
-- Rendered "wait" (postgres/bulk.go, for the ids still held after the
-- rounds), the rows are locked FOR UPDATE, waiting, one job at a time,
-- under a lock_timeout: a claim never waits on it, since claims skip
-- locked rows and the statement holds no job row while it waits.
--
-- Job rows are locked FOR UPDATE SKIP LOCKED, in id order: a row that a
-- claim, a finisher or a heartbeat holds is passed over (the statement
-- returns those ids, and the store tries them again after the walk), so
-- this never waits on a job row and a claim never waits on it (claims
-- skip locked rows too). Lock order as in cancel.sql: job rows, then
-- group rows in key order (free_slots), then key rows (release_keys); a
-- finisher of the same group or an enqueue of the same key waits for this
-- short transaction at most.
--
-- Returns how many it cancelled, the walk's last id (NULL: the walk is
-- over), the ids it passed over because another transaction held them,
-- and the groups of the pending jobs it cancelled: the store marks their
-- next jobs once this has committed (postgres/groupmarks.go).
WITH {{template "bulk_scan" "readpast_jobs"}},
target AS (
    SELECT id FROM readpast_jobs
    WHERE id = ANY (ARRAY(SELECT id FROM scan))
      AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR state = $3)
      AND ($5 = '' OR group_key = $5)
      AND readpast_stall('bulk.before_locks', id)
    ORDER BY id
    FOR UPDATE{{if not .}} SKIP LOCKED{{end}}
),
done AS (
    DELETE FROM readpast_jobs j
    WHERE j.id = ANY (ARRAY(SELECT id FROM target))
    RETURNING j.*
),
moved AS (
    {{template "history_insert"}}
    SELECT id, queue, kind, payload, priority, run_at, 'cancelled', attempt, max_attempts, token,
           worker, group_key, created_at, started_at, now(), errors, NULL, unique_key, unique_until,
           tags, snoozes, more_keys
    FROM done
),
changes AS (
    SELECT queue, 'cancelled' AS state, 1::bigint AS n FROM done
    UNION ALL
    SELECT queue, state, -1 FROM done
),
{{template "count_changes"}},
freeing AS (
    SELECT group_key, count(*) AS n
    FROM (SELECT group_key FROM done WHERE group_key IS NOT NULL AND state = 'running'
          UNION ALL
          SELECT unnest(more_keys) FROM done WHERE more_keys IS NOT NULL AND state = 'running') k
    GROUP BY group_key
),
{{template "free_slots"}},
ending AS (
    SELECT id, unique_key FROM done WHERE unique_key IS NOT NULL
),
{{template "release_keys"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM freed LIMIT 1) f
)
SELECT (SELECT count(*) FROM done),
       (SELECT max(id) FROM scan),
       ARRAY(SELECT s.id FROM scan s
             WHERE s.id NOT IN (SELECT id FROM target)
               AND EXISTS (SELECT 1 FROM readpast_jobs j WHERE j.id = s.id
                             AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
                             AND ($3 = '' OR state = $3) AND ($5 = '' OR group_key = $5))),
       ARRAY(SELECT DISTINCT group_key FROM done WHERE state = 'pending' AND group_key IS NOT NULL)
WHERE (SELECT count(*) FROM notified) >= 0
  AND readpast_stall('bulk.locked', (SELECT count(*) FROM done));
