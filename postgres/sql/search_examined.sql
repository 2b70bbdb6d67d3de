-- How many jobs a search (search.sql) with state filter $1 and ids below
-- $2 examines with a budget of $3, and the lowest id among them. Index-only
-- reads of the primary keys; locks nothing.
SELECT count(*), coalesce(min(id), 0)
FROM (
    (SELECT id FROM readpast_jobs
     WHERE id < $2 AND ($1 = '' OR $1 IN ('blocked', 'pending', 'running'))
     ORDER BY id DESC
     LIMIT $3)
    UNION ALL
    (SELECT id FROM readpast_jobs_history
     WHERE id < $2 AND ($1 = '' OR $1 IN ('succeeded', 'failed', 'cancelled'))
     ORDER BY id DESC
     LIMIT $3)
    ORDER BY id DESC
    LIMIT $3
) examined;
