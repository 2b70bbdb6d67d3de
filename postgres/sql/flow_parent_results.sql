-- The parents of the jobs $1 (claimed ones, for a claim that asks for
-- their parents' results), with each parent's ref in the child's flow
-- and its stored result if it succeeded (NULL otherwise, or if it stored
-- none). A job that is no edge's child returns nothing. Reads the edges
-- by readpast_edges_child, and each parent's history row by its primary
-- key. A batch's seal (an edge from a negative id) is no parent. Locks
-- nothing.
SELECT e.child_id, e.parent_id, e.parent_ref, h.result
FROM readpast_edges e
LEFT JOIN readpast_jobs_history h ON h.id = e.parent_id AND h.state = 'succeeded'
WHERE e.child_id = ANY ($1::bigint[]) AND e.parent_id > 0
ORDER BY e.child_id, e.parent_id;
