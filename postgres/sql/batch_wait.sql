-- Make batch $1's finishing job wait for $2 more members, if it is still
-- blocked: an operator may have cancelled it since batch_lock.sql read it
-- (a cancel takes no edge row). Returns its id when it waits, no row when
-- it has ended: the join is refused before it writes anything, so a
-- caller's transaction that goes on and commits stores nothing of it.
-- The finishing job's row is taken after the seal edge's, and held until
-- the join's transaction ends.
UPDATE readpast_jobs SET waiting_on = waiting_on + $2::integer
WHERE id = $1::bigint AND state = 'blocked' AND readpast_stall('batch.join', $1::bigint)
RETURNING id
