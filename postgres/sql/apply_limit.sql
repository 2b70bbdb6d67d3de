-- Give key rows the limit that governs each now (readpast_key_limit),
-- and return the keys whose limit changed (changed true). A row's running
-- count stays: a lowered limit preempts nothing. The bucket keeps the
-- starts it counted: a new rate rescales the time they still take (tat
-- past now) to its own interval. The trigger on readpast_groups
-- (migrations/0008) marks the keys whose free slots went up;
-- mark_keys.sql marks the rest. The store then folds the freed-slot
-- counts of the keys it changed (fold_freed.sql) in the same
-- transaction, holding their rows.
--
-- Rendered "skip", for every row that the limit $1 (a key, or a template
-- "prefix*") may govern: it runs under the limits' lock that its
-- transaction holds exclusively (so readpast_key_limit reads this
-- transaction's change, and no claim creates a key's row meanwhile),
-- after limit_lock.sql, in a statement of its own, so it sees every row a
-- claim created before the lock was granted. It passes over the rows
-- other transactions hold, waiting for none, and returns them too
-- (changed false), with any row whose limit it could not resolve
-- (readpast_key_limit without the lock: limit_lock.sql takes it shared
-- as well, so none).
--
-- Rendered "one", for the row of the key $1 only, which the transaction
-- already holds FOR UPDATE (lock_key_row.sql, waiting for whoever held
-- it: claims, finishers, finishers' FOR KEY SHARE on the rows of the
-- keys they free slots of), and with the limits' lock held shared
-- (limit_lock_shared.sql, taken after the row): the store runs it for
-- each row the "skip" rendering passed over, in a transaction of its own
-- after the exclusive lock is let go, so that it never holds one key row
-- while it waits for another (finishers lock key rows in two passes,
-- fragments/free_slots.sql, and a limit change holding several could
-- wait for them in a circle), nor the limits' lock while it waits for a
-- row (a change queued for the lock exclusively would make every claim
-- that creates a key's row pass it over meanwhile). Claims never wait
-- for either rendering: they pass a held row over.
WITH governed AS (
    SELECT group_key
    FROM readpast_groups
{{- if eq . "one"}}
    WHERE group_key = $1
      AND readpast_stall('limit.apply', group_key)
    FOR UPDATE
{{- else}}
    WHERE (group_key = $1 OR (right($1, 1) = '*' AND starts_with(group_key, left($1, -1))))
      AND readpast_stall('limit.apply', group_key)
    ORDER BY group_key
    FOR UPDATE SKIP LOCKED
{{- end}}
),
resolved AS (
    SELECT g.group_key, k.*
    FROM governed g
    CROSS JOIN LATERAL readpast_key_limit(g.group_key) k
    WHERE k.ok
),
changed AS (
    UPDATE readpast_groups g
    SET limit_key = r.limit_key, max_running = r.max_running,
        interval_us = r.interval_us, burst = r.burst, weight = r.weight,
        tat = CASE WHEN g.interval_us > 0 AND r.interval_us > 0 AND g.interval_us <> r.interval_us
                        AND g.tat > clock_timestamp()
                   THEN clock_timestamp() + ceil(extract(epoch FROM g.tat - clock_timestamp()) * 1000000
                                                 * r.interval_us / g.interval_us) * interval '1 microsecond'
                   ELSE g.tat END
    FROM resolved r
    WHERE g.group_key = r.group_key
      AND (g.limit_key, g.max_running, g.interval_us, g.burst, g.weight)
          IS DISTINCT FROM (r.limit_key, r.max_running, r.interval_us, r.burst, r.weight)
    RETURNING g.group_key
)
SELECT group_key, true FROM changed
{{- if ne . "one"}}
UNION ALL
SELECT group_key, false
FROM readpast_groups
WHERE (group_key = $1 OR (right($1, 1) = '*' AND starts_with(group_key, left($1, -1))))
  AND group_key NOT IN (SELECT group_key FROM resolved)
{{- end}}
