{{/*
count_changes appends a statement's net change to the job counts
(migrations 0005, 0009 and 0010) to readpast_count_deltas: one row per queue and
state whose count it changed. It expects
    changes (queue text, state text, n bigint): +1 for each job row a
        state gains, -1 for each it loses.
Every statement that changes live jobs counts its own changes this way
(migrations 0009 and 0010): a trigger with transition tables copied every
row they touched, old and new, and cost 6-10% of a drain's throughput
(docs/benchmarks.md). Only the history's updates and deletes (retries,
deletes, prunes) are still counted by triggers (0005).
Inserts into readpast_count_deltas never wait on anything.
*/}}{{define "count_changes"}}
counted AS (
    INSERT INTO readpast_count_deltas (queue, state, n)
    SELECT queue, state, sum(n) FROM changes GROUP BY queue, state HAVING sum(n) <> 0
){{end}}
