-- One chunk of the resolver (Store.ResolveFlows): the oldest backlog row
-- (readpast_flow_backlog, schema 16) of a parent with no older row, locked
-- SKIP LOCKED so that resolvers in other processes take other parents;
-- up to $1 of that parent's unresolved edges resolved by its outcome
-- (readpast_resolve_edges_of: edge rows, then child rows, in child
-- order); the row deleted once fewer than $1 were left. Returns the
-- edges it resolved, or no row when there is no backlog to take.
WITH next AS (
    SELECT b.seq, b.parent_id, b.outcome FROM readpast_flow_backlog b
    WHERE NOT EXISTS (SELECT 1 FROM readpast_flow_backlog o WHERE o.parent_id = b.parent_id AND o.seq < b.seq)
    ORDER BY b.seq
    LIMIT 1
    FOR UPDATE SKIP LOCKED
),
resolved AS (
    SELECT seq, readpast_resolve_edges_of(parent_id, outcome, $1) AS n FROM next
),
finished AS (
    DELETE FROM readpast_flow_backlog WHERE seq IN (SELECT seq FROM resolved WHERE n < $1)
)
SELECT n FROM resolved;
