-- Enqueue the jobs of a flow (docs/design/workflows.md), as enqueue.sql
-- does, in the flow's transaction: $1..$10 as there ($9 is not a notify
-- flag here: the NOTIFY always goes, when the transaction commits), $11
-- each job's number of edges (waiting_on: a job with any is 'blocked',
-- never claimed until they are resolved), $12 whether a job of the flow
-- runs after it (has_children: its final transition resolves its edges),
-- $13 its keys after the first (as in enqueue.sql).
-- Only the pending jobs get ready marks (mark_enqueued); a blocked job
-- gets its mark when it is released. Rows come back in input
-- order with their states.
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[], $6::int[], $7::text[],
                $8::text[], $9::text[], $10::text[], $11::int[], $12::boolean[], $13::text[])
        WITH ORDINALITY AS t(queue, kind, payload, priority, run_at, max_attempts, group_key, tags,
                             traceparent, tracestate, waiting_on, has_children, more_keys, ord)
),
inserted AS (
    INSERT INTO readpast_jobs (queue, kind, payload, priority, run_at, max_attempts, group_key, tags,
                               traceparent, tracestate, state, waiting_on, has_children, more_keys)
    SELECT queue, kind, payload, priority, coalesce(run_at, now()), max_attempts, group_key,
           string_to_array(tags, ' '), traceparent, tracestate,
           CASE WHEN waiting_on > 0 THEN 'blocked' ELSE 'pending' END, waiting_on, has_children,
           string_to_array(more_keys, ' ')
    FROM input ORDER BY ord
    RETURNING *
),
changes AS (
    SELECT queue, state, 1::bigint AS n FROM inserted
),
{{template "count_changes"}},
{{template "mark_enqueued"}},
{{template "tag_enqueued"}},
notified AS (
    SELECT pg_notify('readpast', '')
)
SELECT id, queue, kind, payload, priority, state, attempt, max_attempts, run_at,
       group_key, NULL::text, NULL::timestamptz, worker, created_at, started_at,
       NULL::timestamptz, errors, NULL::jsonb, unique_key, unique_until,
       array_to_string(tags, ' '), snoozes, array_to_string(more_keys, ' ')
FROM inserted
WHERE (SELECT count(*) FROM notified) >= 0
ORDER BY id;
