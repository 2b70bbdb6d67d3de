-- Seal batch $1: resolve its seal edge as a succeeded parent's edge is
-- resolved (readpast_resolve_edges_of locks the edge row, then the
-- finishing job's row, and releases the job when no member is left).
-- Returns 1 when this call sealed it, 0 when it was sealed before; no
-- row: there is no batch $1.
SELECT readpast_resolve_edges_of(-$1::bigint, 'succeeded', 1)
FROM readpast_edges
WHERE parent_id = -$1::bigint AND child_id = $1::bigint
