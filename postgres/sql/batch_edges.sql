-- Store the edges from the members $2 (ids this transaction inserted,
-- with has_children set) to batch $1's finishing job, of policy $3. The
-- finishing job's row is held (batch_wait.sql), so none of the members'
-- ends can reach it before the edges are here.
INSERT INTO readpast_edges (parent_id, child_id, policy)
SELECT m, $1::bigint, $3::text FROM unnest($2::bigint[]) AS m
ORDER BY m
