-- Mark the keys $1, whose limits changed, at their first due pending
-- jobs per queue (at most 64 jobs a key), and wake the claimers: a higher
-- burst or rate gives tokens that no mark announces otherwise (marks of
-- keys out of tokens wait for their next start). Run in the transaction
-- that holds the keys' rows, after the statement that changed them, so
-- its snapshot shows every job whose mark a claim used up before.
-- Marks are hints: one too many costs a claim one look.
WITH marked AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (k.key, j.queue) j.queue, j.priority, readpast_turn(k.key, j.run_at), j.id, k.key
    FROM unnest($1::text[]) AS k(key)
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at
        FROM readpast_jobs
        WHERE group_key = k.key AND state = 'pending' AND run_at <= clock_timestamp()
        ORDER BY priority, run_at, id
        LIMIT 64
    ) j
    ORDER BY k.key, j.queue, j.priority, j.run_at, j.id
    RETURNING 1
)
SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM marked LIMIT 1) m
