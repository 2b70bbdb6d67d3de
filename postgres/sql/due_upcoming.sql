-- The earliest times at which pending jobs become due, read when a
-- store's listener (re)connects: announcements of jobs enqueued for later
-- that were sent while it was not listening were missed, and the store
-- sets its alarms from these instead (postgres/due.go). It reads the live
-- table's pending jobs (a top-N sort; no index orders all queues by
-- run_at) and locks nothing.
SELECT DISTINCT run_at
FROM (SELECT run_at FROM readpast_jobs
      WHERE state = 'pending' AND run_at > now()
      ORDER BY run_at LIMIT $1) j;
