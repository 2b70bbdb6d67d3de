-- Mark the locked jobs $1 as parents (has_children: their final
-- statements resolve their edges), once the flow knows it will store
-- its edges to them.
UPDATE readpast_jobs SET has_children = true
WHERE id = ANY ($1::bigint[]) AND NOT has_children;
