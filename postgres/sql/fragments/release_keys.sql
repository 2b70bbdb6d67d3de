{{/*
release_keys frees the unique keys of jobs this statement finished. It
expects a CTE
    ending (id bigint, unique_key text)
naming the finished jobs that have a key, and the CTE freed of free_slots,
and defines locked_keys, released_keys and kept_keys.

A key row is released only by its holder (job_id = id). A key without a
period, or whose period has ended, is deleted; one still in its period is
marked no longer live and stays held until keep_until.

Lock order: job rows, then group rows (free_slots: the scalar subquery on
freed makes those come first), then key rows, in key order. An enqueue of
the same key waits for this statement's transaction (its insert's
conflict check waits for the deleter or updater of the conflicting row),
which is inherent to uniqueness; claims never touch key rows.

Every read of the key table is bounded by = ANY (ARRAY(...)) on the keys
at hand, so that a plan made once (the complete routine) cannot walk the
whole table whatever the join order.
*/}}{{define "release_keys"}}
locked_keys AS (
    SELECT k.unique_key, coalesce(k.keep_until > now(), false) AS kept
    FROM readpast_unique_keys k
    JOIN ending e ON e.unique_key = k.unique_key AND e.id = k.job_id
    WHERE k.unique_key = ANY (ARRAY(SELECT unique_key FROM ending))
      AND (SELECT count(*) FROM freed) >= 0 AND readpast_stall('finish.keys', k.unique_key)
    ORDER BY k.unique_key
    FOR UPDATE OF k
),
released_keys AS (
    DELETE FROM readpast_unique_keys k
    USING locked_keys l
    WHERE k.unique_key = ANY (ARRAY(SELECT unique_key FROM locked_keys))
      AND k.unique_key = l.unique_key AND NOT l.kept
),
kept_keys AS (
    UPDATE readpast_unique_keys k
    SET live = false
    FROM locked_keys l
    WHERE k.unique_key = ANY (ARRAY(SELECT unique_key FROM locked_keys))
      AND k.unique_key = l.unique_key AND l.kept
){{end}}
