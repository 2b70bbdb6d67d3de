-- Delete up to $3 finished jobs in state $1 that finished before $2,
-- oldest first; callers loop in small batches.
DELETE FROM readpast_jobs_history
WHERE id IN (
    SELECT id FROM readpast_jobs_history
    WHERE state = $1 AND finished_at < $2
    ORDER BY finished_at
    LIMIT $3
);
