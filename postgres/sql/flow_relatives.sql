-- The edges of job $1: those to its parents (side 'p', in parent id
-- order) and those to its children (side 'c', in child id order), at
-- most $2 of each (NULL: all). Each side reads one index: the primary
-- key for the children, readpast_edges_child for the parents. A batch's
-- seal (an edge from a negative id: no job) is no parent. Locks nothing.
(SELECT 'p', parent_id, child_id, parent_ref, child_ref, policy, state
 FROM readpast_edges WHERE child_id = $1 AND parent_id > 0
 ORDER BY parent_id LIMIT $2)
UNION ALL
(SELECT 'c', parent_id, child_id, parent_ref, child_ref, policy, state
 FROM readpast_edges WHERE parent_id = $1
 ORDER BY child_id LIMIT $2);
