-- Mark the next claimable jobs of group $1 (markGroupHeads, after a
-- cancel of one of its jobs has committed): among the group's first free
-- (at least 1, at most 64) due pending jobs across all queues, the first
-- one in each queue gets a ready mark at the key's turn, as the announce
-- trigger does for a freed slot (migrations/0008, 0012). A group that
-- looks full still gets its head marked: a finisher of the group between
-- its announce trigger and its commit (a CompleteTx held open) may have
-- marked the cancelled job, read as the head then, and nothing else, and
-- its commit frees a slot that no mark would then lead to. A mark on a
-- full group costs a claim one look; the claim that holds the group uses
-- it or marks again. A job may be marked twice (a second mark costs a
-- claim one more row to walk, and the claim that holds the group uses up
-- both).
--
-- Locks: none (inserts only). Waits on nothing.
INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT DISTINCT ON (j.queue) j.queue, j.priority, greatest(j.run_at, f.served_at), j.id, $1
FROM (SELECT greatest(coalesce(max(max_running - running), 1), 0) AS free, max(served_at) AS served_at
      FROM readpast_groups WHERE group_key = $1) f
CROSS JOIN LATERAL (
    SELECT id, queue, priority, run_at
    FROM readpast_jobs
    WHERE group_key = $1 AND state = 'pending' AND run_at <= clock_timestamp()
    ORDER BY priority, run_at, id
    LIMIT least(greatest(f.free, 1), 64)
) j
ORDER BY j.queue, j.priority, j.run_at, j.id;
