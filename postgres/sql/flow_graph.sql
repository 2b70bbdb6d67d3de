-- The jobs connected to job $1 by edges, in either direction, breadth
-- first: $1, then the jobs one edge away in id order, then those two
-- edges away, and so on; at most $2 + 1 of them (the one past $2 says
-- the graph holds more). Each step of the recursion is one level: its
-- row carries the level's ids (frontier) and every id found so far
-- (seen). A level's new ids are its jobs' neighbours EXCEPT seen (one
-- hashed pass over both), so a job reached again, by any path, is never
-- read twice; the recursion ends at the first level that finds nothing
-- new or once more than $2 are found. Each job of a level reads its
-- edges through the two indexes (children by the primary key, parents by
-- readpast_edges_child); a batch's seal (an edge from a negative id: no
-- job) leads nowhere. Locks nothing.
WITH RECURSIVE bfs(frontier, seen) AS (
    SELECT ARRAY[$1::bigint], ARRAY[$1::bigint]
    UNION ALL
    SELECT nxt.ids, b.seen || nxt.ids
    FROM bfs b
    CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}'::bigint[]) AS ids
        FROM (
            SELECT n.id
            FROM (
                SELECT nb.id
                FROM unnest(b.frontier) AS f(id)
                CROSS JOIN LATERAL (
                    SELECT e.child_id FROM readpast_edges e WHERE e.parent_id = f.id
                    UNION ALL
                    SELECT e.parent_id FROM readpast_edges e WHERE e.child_id = f.id AND e.parent_id > 0
                ) AS nb(id)
                EXCEPT
                SELECT unnest(b.seen)
            ) AS n
            ORDER BY n.id
            LIMIT $2::integer + 1 - cardinality(b.seen)
        ) x
    ) nxt
    WHERE cardinality(b.frontier) > 0 AND cardinality(b.seen) <= $2::integer
)
SELECT seen FROM bfs ORDER BY cardinality(seen) DESC LIMIT 1;
