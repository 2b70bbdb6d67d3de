-- Set how many jobs of group $1 may run at once ($2). The key's advisory
-- lock comes first, so a claim that is creating the row meanwhile (it
-- holds a try-lock on the same key) has committed before the INSERT looks
-- for a conflict, and no claim starts creating it until this commits. The
-- upsert then waits for whoever holds the group row: a claim statement,
-- or a finisher, possibly inside a caller's open transaction. Claims that
-- lock the row after this commits see the new limit. A raised limit marks
-- the group's next jobs: the trigger on readpast_groups does, once the row
-- is held (migrations/0008).
WITH gate AS (
    SELECT pg_advisory_xact_lock(1919181683, hashtext($1))
),
freed AS (
    INSERT INTO readpast_groups (group_key, max_running)
    SELECT $1, $2 FROM gate WHERE readpast_stall('set_group_limit.group_row', $1)
    ON CONFLICT (group_key) DO UPDATE SET max_running = EXCLUDED.max_running
    RETURNING group_key, max_running - running AS free
),
notified AS (
    SELECT pg_notify('readpast', '') FROM (SELECT 1 FROM freed WHERE free > 0) f
)
SELECT count(*) FROM freed
WHERE (SELECT count(*) FROM notified) >= 0 AND readpast_stall('set_group_limit.end', group_key);
