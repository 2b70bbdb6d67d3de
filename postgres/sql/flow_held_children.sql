-- How many blocked jobs finished job $1 holds back (its unresolved edges
-- to jobs still blocked: 'held' ones, or 'open' ones the resolver has yet
-- to reach), and whether it has edges left to the resolver: Delete
-- refuses to delete it while either (holds_no_child).
SELECT (SELECT count(*) FROM readpast_edges d JOIN readpast_jobs c ON c.id = d.child_id
        WHERE d.parent_id = $1 AND d.state <> 'done' AND c.state = 'blocked'),
       EXISTS (SELECT 1 FROM readpast_flow_backlog b WHERE b.parent_id = $1);
