-- Every queue that has live jobs, jobs finished since $1 or is paused:
-- its live jobs counted exactly (due, scheduled, running, and retrying:
-- pending after a failed attempt) with the run_at of its oldest due job,
-- the jobs it finished since $1 per final state, and when it was paused. One snapshot. Reads the whole live table, and
-- history only from $1 on (the BRIN index on finished_at); locks nothing.
SELECT queue, sum(due)::bigint, sum(scheduled)::bigint, sum(running)::bigint, sum(retrying)::bigint,
       sum(succeeded)::bigint, sum(failed)::bigint, sum(cancelled)::bigint,
       min(oldest_due), max(paused_at)
FROM (
    SELECT queue,
           count(*) FILTER (WHERE state = 'pending' AND run_at <= now()) AS due,
           count(*) FILTER (WHERE state = 'pending' AND run_at > now()) AS scheduled,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'pending' AND attempt > 0) AS retrying,
           0 AS succeeded, 0 AS failed, 0 AS cancelled,
           min(run_at) FILTER (WHERE state = 'pending' AND run_at <= now()) AS oldest_due,
           NULL::timestamptz AS paused_at
    FROM readpast_jobs
    GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, 0, 0,
           count(*) FILTER (WHERE state = 'succeeded'),
           count(*) FILTER (WHERE state = 'failed'),
           count(*) FILTER (WHERE state = 'cancelled'),
           NULL, NULL
    FROM readpast_jobs_history
    WHERE finished_at >= $1
    GROUP BY queue
    UNION ALL
    SELECT name, 0, 0, 0, 0, 0, 0, 0, NULL, paused_at
    FROM readpast_queues
    WHERE paused_at IS NOT NULL
) q
GROUP BY queue
ORDER BY queue;
