-- Store a flow's edges: $1 parent ids, $2 child ids, $3 policies, $4 the
-- parents' refs in the flow and $5 the children's ('' where a job has
-- none, or was named by id). Both ends are rows this transaction inserted
-- or locked (flow_parents.sql), so no parent can finish before its edges
-- are here.
INSERT INTO readpast_edges (parent_id, child_id, policy, parent_ref, child_ref)
SELECT parent_id, child_id, policy, parent_ref, child_ref
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[])
    AS t(parent_id, child_id, policy, parent_ref, child_ref)
WHERE readpast_stall('flow.edges', t.child_id)
ORDER BY 1, 2;
