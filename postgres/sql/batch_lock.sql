-- Lock batch $1's seal edge and read it with its finishing job's state
-- (from either table; '' for none). AddToBatch takes it first: joins and
-- the seal take turns on it, and, as everywhere in flows, an edge row
-- comes before its child's row. No row: there is no batch $1.
SELECT e.policy, e.state, coalesce(j.state, h.state, '')
FROM readpast_edges e
LEFT JOIN readpast_jobs j ON j.id = e.child_id
LEFT JOIN readpast_jobs_history h ON h.id = e.child_id
WHERE e.parent_id = -$1::bigint AND e.child_id = $1::bigint
FOR UPDATE OF e
