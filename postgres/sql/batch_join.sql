-- Make batch $1's finishing job wait for the members $2 (ids this
-- transaction inserted, with has_children set), through edges of policy
-- $3, if it is still blocked: an operator may have cancelled it since
-- batch_lock.sql read it (a cancel takes no edge row). Returns 1 when
-- they joined, 0 when the finishing job has ended (the caller rolls
-- back). The finishing job's row is taken after the seal edge's.
WITH fin AS (
    UPDATE readpast_jobs SET waiting_on = waiting_on + cardinality($2::bigint[])
    WHERE id = $1::bigint AND state = 'blocked' AND readpast_stall('batch.join', $1::bigint)
    RETURNING id
),
edges AS (
    INSERT INTO readpast_edges (parent_id, child_id, policy)
    SELECT m, fin.id, $3::text FROM unnest($2::bigint[]) AS m CROSS JOIN fin
    ORDER BY m
)
SELECT count(*) FROM fin
