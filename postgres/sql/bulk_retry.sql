-- One batch of BulkRetry: the failed and cancelled jobs among the ids of
-- the walk (the bulk_scan fragment; its parameters $1..$8) that still
-- match the filters come back from history pending now, as retry.sql
-- does for one: same id, attempts and snoozes reset, errors and tags
-- kept, a ready mark when grouped. A job with a unique key takes it again
-- (its row inserted, or taken over when it no longer holds the key or is
-- the job's own); when another job holds it, the job stays in history.
-- Of several jobs of the batch with one key, only the oldest tries (as
-- when they are retried one by one in id order).
--
-- Rendered "wait" (postgres/bulk.go, for the ids still held after the
-- rounds), the rows are locked FOR UPDATE, waiting, one job at a time,
-- under a lock_timeout: a claim never waits on it, since claims skip
-- locked rows and the statement holds no job row while it waits.
--
-- History rows are locked FOR UPDATE SKIP LOCKED in id order (a prune,
-- Delete or another retry holding one: passed over, returned, tried again
-- by the store after the walk), then key rows (the inserts wait only for
-- a transaction inserting or releasing the same key). It touches no
-- group row and no live row but its own inserts: claims never wait on it.
--
-- Returns how many it retried, the walk's last id (NULL: the walk is
-- over), the ids it passed over, and NULL (bulk_cancel.sql returns groups
-- there).
WITH {{template "bulk_scan" "readpast_jobs_history"}},
cand AS (
    SELECT id, unique_key, unique_until FROM readpast_jobs_history
    WHERE id = ANY (ARRAY(SELECT id FROM scan)) AND state IN ('failed', 'cancelled')
      AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2) AND ($3 = '' OR state = $3)
      AND ($5 = '' OR group_key = $5)
    ORDER BY id
    FOR UPDATE{{if not .}} SKIP LOCKED{{end}}
),
took AS (
    INSERT INTO readpast_unique_keys AS k (unique_key, job_id, keep_until)
    SELECT DISTINCT ON (unique_key) unique_key, id, unique_until FROM cand
    WHERE unique_key IS NOT NULL
    ORDER BY unique_key, id
    ON CONFLICT (unique_key) DO UPDATE
    SET job_id = excluded.job_id, live = true, keep_until = excluded.keep_until
    WHERE k.job_id = excluded.job_id OR (NOT k.live AND k.keep_until <= now())
    RETURNING job_id
),
old AS (
    DELETE FROM readpast_jobs_history h
    USING cand c
    WHERE h.id = c.id AND (c.unique_key IS NULL OR c.id IN (SELECT job_id FROM took))
    RETURNING h.*
),
revived AS (
    INSERT INTO readpast_jobs
        (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts,
         worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, snoozes, more_keys,
         has_children)
    SELECT id, queue, kind, payload, priority, now(), 'pending', 0, max_attempts,
           worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, 0, more_keys,
           -- a parent that holds back children releases them when it succeeds
           EXISTS (SELECT 1 FROM readpast_edges d WHERE d.parent_id = old.id AND d.state <> 'done')
    FROM old
    RETURNING id, queue, priority, run_at, group_key
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM revived
),
{{template "count_changes"}},
marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM revived WHERE group_key IS NOT NULL
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM revived LIMIT 1) r
)
SELECT (SELECT count(*) FROM revived),
       (SELECT max(id) FROM scan),
       ARRAY(SELECT s.id FROM scan s
             WHERE s.id NOT IN (SELECT id FROM cand)
               AND EXISTS (SELECT 1 FROM readpast_jobs_history h WHERE h.id = s.id
                             AND h.state IN ('failed', 'cancelled')
                             AND ($1 = '' OR queue = $1) AND ($2 = '' OR kind = $2)
                             AND ($3 = '' OR state = $3) AND ($5 = '' OR group_key = $5))),
       NULL::text[]
WHERE (SELECT count(*) FROM notified) >= 0;
