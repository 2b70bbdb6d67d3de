-- Complete a batch: each job moves from live to history as succeeded, only
-- if id, token and running state all match. The caller sends each (id,
-- token) pair once, sorted by id, so job rows are locked in id order;
-- group slots are then freed and the groups' next jobs marked (the
-- free_slots fragment: job rows first, then group rows in key order).
-- Returns the ids that completed, their tokens, whether each was a
-- flow's parent (its children may have been released: the store then
-- makes its next claims full ones and wakes its claimers), and whether
-- the statement freed a slot of a key (freed, on every row), for which
-- other processes' claimers are woken: by the NOTIFY this statement sends
-- when $4 is set (inside a caller's transaction, whose commit the store
-- does not see), else by one the store sends once the statement has
-- committed (postgres/notify.go).
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::jsonb[]) AS t(id, token, result)
),
-- The DELETE finds its rows by primary key (= ANY walks the index in id
-- order, so rows are locked in id order) and locks each itself: no
-- SELECT ... FOR UPDATE first, which would look every row up twice and
-- write a lock record for it as well (17 instead of 15 us of execution a
-- job in a 1000-worker drain). The (id, token) pair check is a hashed lookup kept
-- out of the join planner (IS TRUE), so the plan cannot turn into a scan
-- of the running jobs, and a row changed since this statement's snapshot
-- (rescued and claimed again under another token) is checked again on its
-- newest version and left alone. A job's token is set exactly while it
-- runs (CHECK on readpast_jobs), so "id and token match" is the whole id +
-- token + running check. Spelling out state = 'running' too would let the
-- planner pick the partial lease index, which holds only running jobs,
-- and scan all of them for each id (measured: 192 ms for 1000 completions
-- instead of a few).
done AS (
    DELETE FROM readpast_jobs j
    WHERE j.id = ANY ($1::bigint[])
      AND ((j.id, j.token) IN (SELECT id, token FROM input)) IS TRUE
      AND readpast_stall('complete.before_locks', j.id)
    RETURNING j.*
),
moved AS (
    {{template "history_insert"}}
    SELECT d.id, queue, kind, payload, priority, run_at, 'succeeded', attempt, max_attempts, d.token,
           worker, group_key, created_at, started_at, now(), errors, t.result, unique_key, unique_until,
           tags, snoozes, more_keys
    FROM done d JOIN input t ON t.id = d.id AND t.token = d.token
),
changes AS (
    SELECT queue, 'succeeded' AS state, 1::bigint AS n FROM done
    UNION ALL
    SELECT queue, state, -1 FROM done
),
{{template "count_changes"}},
freeing AS (
    SELECT group_key, count(*) AS n
    FROM (SELECT group_key FROM done WHERE group_key IS NOT NULL
          UNION ALL
          SELECT unnest(more_keys) FROM done WHERE more_keys IS NOT NULL) k
    GROUP BY group_key
),
{{template "free_slots"}},
ending AS (
    SELECT id, unique_key FROM done WHERE unique_key IS NOT NULL
),
{{template "release_keys"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM freed LIMIT 1) f WHERE $4::boolean
)
SELECT id, token::text, has_children, EXISTS (SELECT 1 FROM freed)
FROM done WHERE (SELECT count(*) FROM notified) >= 0;
