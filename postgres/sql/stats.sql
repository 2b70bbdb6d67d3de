-- Job counts per queue and state, live and finished.
SELECT queue, state, count(*) FROM readpast_jobs GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*) FROM readpast_jobs_history GROUP BY queue, state
ORDER BY 1, 2;
