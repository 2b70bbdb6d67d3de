-- Store a flow's edges: $1 parent ids, $2 child ids, $3 policies. Both
-- ends are rows this transaction inserted or locked (flow_parents.sql),
-- so no parent can finish before its edges are here.
INSERT INTO readpast_edges (parent_id, child_id, policy)
SELECT parent_id, child_id, policy
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS t(parent_id, child_id, policy)
WHERE readpast_stall('flow.edges', t.child_id)
ORDER BY 1, 2;
