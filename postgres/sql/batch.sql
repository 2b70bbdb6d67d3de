-- Read batch $1: its seal's policy and state, and its members (the
-- finishing job's parents) counted by state: live ones from
-- readpast_jobs, the others by their history rows. Members pruned from
-- history have no edge left and are not counted. No row: there is no
-- batch $1.
SELECT s.policy, s.state,
       count(m.parent_id),
       count(j.id),
       count(*) FILTER (WHERE j.id IS NULL AND h.state = 'succeeded'),
       count(*) FILTER (WHERE j.id IS NULL AND h.state = 'failed'),
       count(*) FILTER (WHERE j.id IS NULL AND h.state = 'cancelled')
FROM readpast_edges s
LEFT JOIN readpast_edges m ON m.child_id = s.child_id AND m.parent_id > 0
LEFT JOIN readpast_jobs j ON j.id = m.parent_id
LEFT JOIN readpast_jobs_history h ON h.id = m.parent_id
WHERE s.parent_id = -$1::bigint AND s.child_id = $1::bigint
GROUP BY s.policy, s.state
