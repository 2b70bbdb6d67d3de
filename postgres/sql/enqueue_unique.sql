-- Enqueue a batch whose jobs may carry unique keys (enqueue.sql is the
-- same statement without keys). Inputs are parallel arrays; $8 holds each
-- job's key (NULL for none), and $9 its period in microseconds (NULL for
-- none). The caller sends each key once (later entries of a batch with the
-- same key are settled by the caller as duplicates of the first). $10
-- holds each job's tags, $11 and $12 its creation context, and $13 its
-- keys after the first, as in enqueue.sql.
--
-- Job ids are drawn first, in input order. Each key is inserted into
-- readpast_unique_keys with ON CONFLICT DO NOTHING, in key order: the
-- primary key decides, race-free, whether this statement takes the key.
-- The insert waits only for a transaction that is inserting the same key,
-- or deleting or updating its row (a finisher or retry of its holder, an
-- enqueue removing it once its period ended); it never waits on a claim,
-- which never touches key rows. A job is inserted when it has no key or
-- took it, with a ready mark as in enqueue.sql.
--
-- Rows come back per input entry, in input order (ord): 'new' with the
-- inserted job; 'duplicate' with the job that holds the key, as this
-- statement's snapshot sees it. An entry that did not take its key and
-- whose holder this snapshot cannot see (the key was inserted by a
-- transaction that committed after the snapshot) or whose row no longer
-- holds it (its period ended) comes back not at all: the caller frees
-- stale rows (unique_stale.sql) and sends it again, in a new statement.
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::timestamptz[], $6::int[], $7::text[],
                $8::text[], $9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[])
        WITH ORDINALITY AS t(queue, kind, payload, priority, run_at, max_attempts, group_key,
                             unique_key, unique_for, tags, traceparent, tracestate, more_keys, ord)
),
numbered AS (
    SELECT i.*, nextval('readpast_job_id_seq') AS id,
           now() + i.unique_for * interval '1 microsecond' AS unique_until
    FROM (SELECT * FROM input ORDER BY ord) i
),
taken AS (
    INSERT INTO readpast_unique_keys (unique_key, job_id, keep_until)
    SELECT unique_key, id, unique_until
    FROM numbered
    WHERE unique_key IS NOT NULL AND readpast_stall('enqueue.keys', id)
    ORDER BY unique_key
    ON CONFLICT (unique_key) DO NOTHING
    RETURNING job_id
),
inserted AS (
    INSERT INTO readpast_jobs (id, queue, kind, payload, priority, run_at, max_attempts, group_key,
                               unique_key, unique_until, tags, traceparent, tracestate, more_keys)
    SELECT id, queue, kind, payload, priority, coalesce(run_at, now()), max_attempts, group_key,
           unique_key, unique_until, string_to_array(tags, ' '), traceparent, tracestate,
           string_to_array(more_keys, ' ')
    FROM numbered
    WHERE unique_key IS NULL OR id IN (SELECT job_id FROM taken)
    ORDER BY ord
    RETURNING *
),
changes AS (
    SELECT queue, 'pending' AS state, 1::bigint AS n FROM inserted
),
{{template "count_changes"}},
{{template "mark_enqueued"}},
{{template "tag_enqueued"}},
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM inserted LIMIT 1) n
),
-- The holders, one primary-key lookup per entry (joins would let the
-- planner scan whole tables).
holders AS (
    SELECT n.ord, k.job_id
    FROM numbered n
    CROSS JOIN LATERAL (
        SELECT job_id FROM readpast_unique_keys k
        WHERE k.unique_key = n.unique_key AND (k.live OR k.keep_until > now())
    ) k
    WHERE n.unique_key IS NOT NULL AND n.id <> ALL (ARRAY(SELECT job_id FROM taken))
)
SELECT n.ord, 'new', i.id, i.queue, i.kind, i.payload, i.priority, 'pending'::text, i.attempt, i.max_attempts,
       i.run_at, i.group_key, NULL::text, NULL::timestamptz, i.worker, i.created_at, i.started_at,
       NULL::timestamptz, i.errors, NULL::jsonb, i.unique_key, i.unique_until,
       array_to_string(i.tags, ' '), i.snoozes, array_to_string(i.more_keys, ' ')
FROM inserted i JOIN numbered n ON n.id = i.id
WHERE (SELECT count(*) FROM notified) >= 0
UNION ALL
SELECT h.ord, 'duplicate', j.id, j.queue, j.kind, j.payload, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_at, j.group_key, j.token::text, j.lease_expires_at, j.worker, j.created_at, j.started_at,
       NULL::timestamptz, j.errors, NULL::jsonb, j.unique_key, j.unique_until,
       array_to_string(j.tags, ' '), j.snoozes, array_to_string(j.more_keys, ' ')
FROM holders h CROSS JOIN LATERAL (SELECT * FROM readpast_jobs j WHERE j.id = h.job_id) j
UNION ALL
SELECT h.ord, 'duplicate', j.id, j.queue, j.kind, j.payload, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_at, j.group_key, j.token::text, NULL::timestamptz, j.worker, j.created_at, j.started_at,
       j.finished_at, j.errors, j.result, j.unique_key, j.unique_until,
       array_to_string(j.tags, ' '), j.snoozes, array_to_string(j.more_keys, ' ')
FROM holders h CROSS JOIN LATERAL (SELECT * FROM readpast_jobs_history j WHERE j.id = h.job_id) j
ORDER BY 1;
