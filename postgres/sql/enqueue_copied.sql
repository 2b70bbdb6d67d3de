-- The rest of an enqueue whose job rows were written with COPY
-- (postgres/copy.go), in the same transaction: the count of each queue's
-- new pending jobs ($1 queues, $2 counts), the tag rows of the jobs that
-- have tags ($3 ids, $4 their tags joined by spaces), and, when $5 is
-- not NULL, the NOTIFY that wakes other processes' workers when the
-- transaction commits, with $5 as its payload (postgres/notify.go). Like sql/enqueue.sql, it only inserts (fresh ids,
-- delta rows): it never waits on a claim, a finisher or another enqueue.
WITH changes AS (
    SELECT queue, 'pending' AS state, n FROM unnest($1::text[], $2::bigint[]) AS c(queue, n)
),
{{template "count_changes"}},
inserted AS (
    SELECT id, string_to_array(tags, ' ') AS tags FROM unnest($3::bigint[], $4::text[]) AS c(id, tags)
),
{{template "tag_enqueued"}},
notified AS (
    SELECT pg_notify('readpast', $5::text) WHERE $5::text IS NOT NULL
)
SELECT count(*) FROM notified;
