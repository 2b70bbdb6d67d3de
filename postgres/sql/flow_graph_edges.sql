-- The edges between the jobs $1 (both ends among them), in parent, then
-- child order. Reads each job's edges as a parent by the primary key.
-- Locks nothing.
SELECT parent_id, child_id, parent_ref, child_ref, policy, state
FROM readpast_edges
WHERE parent_id = ANY ($1::bigint[]) AND child_id = ANY ($1::bigint[])
ORDER BY parent_id, child_id;
