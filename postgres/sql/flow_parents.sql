-- Lock the jobs $1 that a flow's new jobs run after (ids enqueued
-- before), in the order given: the store sorts them parent before child
-- (by the length of the chain above each, then id), the order in which
-- finishers and their cascades take job rows, so that a flow and a
-- finisher never wait on each other in a cycle. Holding them, none can
-- finish before the flow's edges to it are stored: a finisher's DELETE
-- of the row waits for the flow's transaction, and its resolution
-- trigger then sees the edges. Claims skip the rows meanwhile (SKIP
-- LOCKED) and never wait. Returns the ids found live; the store reads
-- the others to say why they cannot be parents, and marks nothing then.
SELECT id FROM readpast_jobs
WHERE id = ANY ($1::bigint[])
ORDER BY array_position($1::bigint[], id)
FOR NO KEY UPDATE;
