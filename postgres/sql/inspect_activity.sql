-- Minute by minute since $1, for the jobs of queue $2 ('' = every
-- queue): jobs finished per final state, and the percentiles of how long
-- the jobs that started waited after becoming due (run_at, or created_at
-- when later). A history row is one finish event
-- and one start event (its latest attempt's); running jobs are start
-- events. Reads history from $1 on only (the BRIN index on finished_at: a
-- job that started after $1 finished after it) and the running jobs (the
-- lease index); locks nothing.
SELECT minute,
       count(*) FILTER (WHERE state = 'succeeded'),
       count(*) FILTER (WHERE state = 'failed'),
       count(*) FILTER (WHERE state = 'cancelled'),
       count(wait),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY wait), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY wait), 0)
FROM (
    SELECT e.minute, e.state, e.wait
    FROM readpast_jobs_history h,
         LATERAL (VALUES
             (date_trunc('minute', h.finished_at), h.state, NULL::float8),
             (date_trunc('minute', h.started_at), NULL,
              extract(epoch FROM h.started_at - greatest(h.run_at, h.created_at))::float8)
         ) AS e (minute, state, wait)
    WHERE h.finished_at >= $1 AND ($2 = '' OR h.queue = $2)
    UNION ALL
    SELECT date_trunc('minute', started_at), NULL,
           extract(epoch FROM started_at - greatest(run_at, created_at))::float8
    FROM readpast_jobs
    WHERE state = 'running' AND ($2 = '' OR queue = $2)
) events
WHERE minute >= date_trunc('minute', $1)
GROUP BY minute
ORDER BY minute;
