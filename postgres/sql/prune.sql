-- Delete up to $3 finished jobs in state $1 that finished before $2;
-- callers loop in small batches. The BRIN index on finished_at narrows the
-- scan to the old end of the history table.
DELETE FROM readpast_jobs_history
WHERE id IN (
    SELECT id FROM readpast_jobs_history
    WHERE finished_at < $2 AND state = $1
    LIMIT $3
);
