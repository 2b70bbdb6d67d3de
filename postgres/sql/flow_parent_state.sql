-- The state of finished job $1, to say why it cannot be a flow's parent
-- (no row: there is no such job).
SELECT state FROM readpast_jobs_history WHERE id = $1;
