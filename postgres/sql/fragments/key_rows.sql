{{/*
Two parts of the claim (claim.sql) that it applies to its first keys and,
for jobs with several keys, to their later keys alike.

missing_keys is the condition that a key of the CTE named by its argument
(group_key text) has no row in the statement's snapshot, taking the key's
try-lock (1919181683) when so: the claim creates the rows of those keys.
The keys with rows are looked up in one object, built once from the rows
of the keys given (a primary-key lookup each), not key by key.

key_takes is how many jobs a key row g (running, max_running,
interval_us, burst, tat) gives a claim of $3 at the time of its argument:
its free slots, the tokens its bucket has then, and $3, whichever is
least.

fold_locked defines two CTEs for the key rows of the CTE named by its
argument (group_key, max_running), which the claim has locked:
<name>_freed deletes the freed-slot counts of those with a bound and
<name>_folds sums what that DELETE removed per key, which is all the
claim may subtract from the rows' running (a count committed after the
statement's snapshot is left for the next holder of the row).
*/}}{{define "missing_keys"}}CASE WHEN NOT (SELECT coalesce(jsonb_object_agg(group_key, true), '{}')
                         FROM readpast_groups
                         WHERE group_key = ANY (ARRAY(SELECT group_key FROM {{.}}))) ? m.group_key
          THEN pg_try_advisory_xact_lock(1919181683, hashtext(m.group_key))
          ELSE false END{{end}}{{define "key_takes"}}least(greatest(g.max_running - g.running, 0), $3,
                 CASE WHEN g.interval_us = 0 THEN $3
                 ELSE greatest(floor((g.burst * g.interval_us
                         - greatest(extract(epoch FROM g.tat - {{.}}) * 1000000, 0)) / g.interval_us), 0)::bigint
                 END){{end}}{{define "fold_locked"}}{{.}}_freed AS (
    DELETE FROM readpast_key_freed f
    WHERE f.group_key = ANY (ARRAY(SELECT group_key FROM {{.}} WHERE max_running < 2147483647))
    RETURNING f.group_key, f.n
),
{{.}}_folds AS (
    SELECT group_key, sum(n)::int AS n FROM {{.}}_freed GROUP BY group_key
){{end}}
