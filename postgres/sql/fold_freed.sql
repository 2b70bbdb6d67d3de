-- Fold the freed-slot counts of keys without a bound or with room
-- (readpast_key_freed, migrations/0022 and 0025) into their rows: each row's running count goes down by
-- the n of its counts, which are deleted. Rendered "keys", for the keys
-- $1, whose rows the caller's transaction holds FOR UPDATE (a limit
-- change, which waited for the statements holding them FOR KEY SHARE, so
-- every count of those keys has committed); else for up to $1 keys that
-- have counts, after the key $2 in key order (Tidy, PruneGroups), passing
-- over the rows others hold, by one folder at a time: one that finds the
-- try-lock (advisory 1919181684, 2) taken folds nothing and returns NULL.
-- Two folders at once could deadlock: PostgreSQL, locking a row version
-- another transaction has just replaced, waits for whoever holds the newer
-- version whatever the SKIP LOCKED, and the other folder's UPDATE then
-- waits for it in turn (postgres/tidy.go).
-- The rows are taken FOR NO KEY UPDATE, as claims take them; a key's
-- counts are deleted only by a statement that holds its row, so each is
-- subtracted once, and counts committed after this statement's snapshot
-- stay for the next.
-- Returns the keys it folded; rendered for Tidy, one row: the last key it
-- looked at (NULL when there was none), where the next statement starts
-- (the UPDATE runs whether or not its rows are read). The
-- announce trigger (migrations/0008) marks the keys whose free slots went
-- up.
WITH keys AS (
{{- if eq . "keys"}}
    SELECT unnest($1::text[]) AS group_key
{{- else}}
    SELECT DISTINCT group_key FROM readpast_key_freed
    WHERE group_key > $2::text AND (SELECT pg_try_advisory_xact_lock(1919181684, 2))
    ORDER BY group_key LIMIT $1
{{- end}}
),
held AS (
    SELECT g.group_key
    FROM readpast_groups g
    WHERE g.group_key = ANY (ARRAY(SELECT group_key FROM keys))
      AND readpast_stall('fold.rows', g.group_key)
    ORDER BY g.group_key
    FOR NO KEY UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM readpast_key_freed f
    WHERE f.group_key = ANY (ARRAY(SELECT group_key FROM held))
    RETURNING f.group_key, f.n
),
sums AS (
    SELECT group_key, sum(n) AS n FROM gone GROUP BY group_key
)
{{- if eq . "keys"}}
UPDATE readpast_groups g
SET running = g.running - s.n
FROM sums s
WHERE g.group_key = s.group_key
RETURNING g.group_key
{{- else}},
folded AS (
    UPDATE readpast_groups g
    SET running = g.running - s.n
    FROM sums s
    WHERE g.group_key = s.group_key
)
SELECT max(group_key) FROM keys
{{- end}}
