-- The first $2 jobs that edges name with ids above $1, in id order, and
-- for each whether its flow is worth walking (prune_flow.sql): the job is
-- ripe (flow_retention.sql: finished before its state's cutoff, $3-$5,
-- past its unique key's period), and so is every job its flow's edges
-- join it to directly. A batch's member is not walked while its finishing
-- job is live or young (one probe), nor a job next to a live one, so a
-- flow that cannot go is seldom walked at all. Two index scans of the
-- edges (by parent, by child).
WITH named AS (
    (SELECT DISTINCT parent_id AS id FROM readpast_edges
     WHERE parent_id > $1 ORDER BY parent_id LIMIT $2)
    UNION
    (SELECT DISTINCT child_id FROM readpast_edges
     WHERE child_id > $1 ORDER BY child_id LIMIT $2)
),
firsts AS (SELECT id FROM named ORDER BY id LIMIT $2)
SELECT f.id, {{template "ripe_job" "f.id"}}
    AND NOT EXISTS (
        SELECT 1 FROM readpast_edges e
        WHERE e.parent_id = f.id AND {{template "joins_child"}}
          AND NOT {{template "ripe_job" "e.child_id"}})
    AND NOT EXISTS (
        SELECT 1 FROM readpast_edges e
        WHERE e.child_id = f.id AND {{template "joins_parent" "f.id"}}
          AND NOT {{template "ripe_job" "e.parent_id"}})
FROM firsts f
ORDER BY f.id
