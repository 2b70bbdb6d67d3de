-- The earliest times at which pending jobs become due, or keys out of
-- tokens can start one, read when a store's listener (re)connects:
-- announcements sent while it was not listening were missed (of jobs
-- enqueued for later, and of the next starts of keys a claim left out of
-- tokens, which only their ready marks hold), and the store sets its
-- alarms from these instead (postgres/due.go). It reads the live table's
-- pending and blocked jobs (a top-N sort; no index orders all queues by
-- run_at), blocked ones because a flow's child or a batch's finisher may
-- be released before its run_at, by a release whose wake-up comes too
-- early, and the marks not yet due, distinct times (many jobs at one
-- time take one place of the $1), and locks nothing. The stall point
-- stands for a read whose answer comes late: the times it read may be
-- soon or past.
SELECT DISTINCT run_at
FROM (
    (SELECT DISTINCT run_at FROM readpast_jobs
     WHERE state IN ('pending', 'blocked') AND run_at > now()
     ORDER BY run_at LIMIT $1)
    UNION ALL
    (SELECT DISTINCT run_at FROM readpast_group_ready
     WHERE run_at > now()
     ORDER BY run_at LIMIT $1)
) t
WHERE readpast_stall('listen.due_upcoming', run_at)
ORDER BY run_at
LIMIT $1;
