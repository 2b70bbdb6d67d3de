-- Delete up to $3 finished jobs in state $1 that finished before $2;
-- callers loop in small batches. The BRIN index on finished_at narrows the
-- scan to the old end of the history table. A job whose unique key's
-- period has not ended (unique_until, an Idempotency-Key's included) is
-- kept until it has: the key holds for its whole period, and a duplicate
-- is answered with the job. The unique keys the deleted jobs held are
-- freed with them. A job that any edge names is left to prune_flow.sql,
-- which deletes a flow's jobs together (two primary-key probes per job).
-- Their tag rows go too (primary-key lookups: the row lists its tags).
-- History rows first, then key rows, as retry takes them; tag rows are
-- only ever written by enqueue, for fresh ids, so deleting them waits on
-- nobody.
WITH gone AS (
    DELETE FROM readpast_jobs_history
    WHERE id IN (
        SELECT id FROM readpast_jobs_history
        WHERE finished_at < $2 AND state = $1
          AND (unique_until IS NULL OR unique_until <= now())
          AND NOT EXISTS (SELECT 1 FROM readpast_edges d WHERE d.parent_id = readpast_jobs_history.id)
          AND NOT EXISTS (SELECT 1 FROM readpast_edges d WHERE d.child_id = readpast_jobs_history.id)
        LIMIT $3
    )
    RETURNING id, unique_key, tags
),
{{template "drop_history_rows"}}
SELECT count(*) FROM gone;
