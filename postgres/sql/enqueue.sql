-- Enqueue a batch in one statement. Inputs are parallel arrays; rows come
-- back in input order (ids are assigned in that order). $8 holds each
-- job's tags joined by spaces (tags never contain one; NULL for none). It
-- only inserts: job rows with fresh ids, ready marks for grouped jobs
-- (marks have no unique key), tag rows (keyed by the fresh ids) and its
-- count (count_changes). It touches no group row, so it never waits on a
-- claim, a finisher, or another enqueue, whether or not their
-- transactions are open. A NULL run-at means now on the database's clock,
-- the clock claims compare with. When $9 is not NULL, the NOTIFY that
-- wakes other processes' workers, with $9 as its payload (Store.wake), is
-- delivered when the caller's transaction commits, coalesced per
-- transaction; when NULL, the caller sends it
-- (Store.Enqueue coalesces it across enqueues: postgres/notify.go). $10
-- and $11 hold each job's creation context (traceparent, tracestate):
-- NULL arrays when no job has one, which unnest pads with NULLs. $12
-- holds each job's keys after the first, joined by spaces (NULL for
-- none; a NULL array when no job has more than one key).
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[], $6::int[], $7::text[],
                $8::text[], $10::text[], $11::text[], $12::text[])
        WITH ORDINALITY AS t(queue, kind, payload, priority, run_at, max_attempts, group_key, tags,
                             traceparent, tracestate, more_keys, ord)
),
inserted AS (
    INSERT INTO readpast_jobs (queue, kind, payload, priority, run_at, max_attempts, group_key, tags,
                               traceparent, tracestate, more_keys)
    SELECT queue, kind, payload, priority, coalesce(run_at, now()), max_attempts, group_key,
           string_to_array(tags, ' '), traceparent, tracestate, string_to_array(more_keys, ' ')
    FROM input ORDER BY ord
    RETURNING *
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM inserted
),
{{template "count_changes"}},
-- Ready marks for the grouped jobs (see the fragment).
{{template "mark_enqueued"}},
{{template "tag_enqueued"}},
notified AS (
    SELECT pg_notify('readpast', $9::text) FROM (SELECT 1 FROM input LIMIT 1) n WHERE $9::text IS NOT NULL
)
SELECT id, queue, kind, payload, priority, 'pending'::text, attempt, max_attempts, run_at,
       group_key, NULL::text, NULL::timestamptz, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM inserted
WHERE (SELECT count(*) FROM notified) >= 0
ORDER BY id;
