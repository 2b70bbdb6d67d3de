-- The length of the longest chain of parents above each job $1 (through
-- edges, resolved or not), counted up to $2: what EnqueueFlow adds to
-- its own chains under those jobs (readpast.CheckFlowDepth). Reads the
-- edges by child; rows repeated on two paths are read once per depth. A
-- batch's seal (an edge from a negative id: no job) adds no level.
WITH RECURSIVE up(job, node, d) AS (
    SELECT j, j, 0 FROM unnest($1::bigint[]) AS j
    UNION
    SELECT u.job, e.parent_id, u.d + 1
    FROM up u JOIN readpast_edges e ON e.child_id = u.node AND e.parent_id > 0
    WHERE u.d < $2
)
SELECT job, max(d) FROM up GROUP BY job;
