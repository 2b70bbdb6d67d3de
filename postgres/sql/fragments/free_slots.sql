{{/*
free_slots gives group slots back. It expects a CTE
    freeing (group_key text, n bigint)
naming the groups whose running jobs this statement ended, and defines
locked_groups, freed and (through announce_heads) announced.

Lock order: the statement already holds the job rows it ended; the group
rows come after them, in key order. Every statement that waits on group
rows takes them in this order, so finishers never deadlock on each other,
and claims never wait on anything (they skip locked rows).
*/}}{{define "free_slots"}}
locked_groups AS (
    SELECT g.group_key, f.n
    FROM readpast_groups g
    JOIN freeing f USING (group_key)
    WHERE readpast_stall('finish.group_rows', f.n)
    ORDER BY g.group_key
    FOR UPDATE OF g
),
freed AS (
    UPDATE readpast_groups g
    SET running = g.running - l.n
    FROM locked_groups l
    WHERE g.group_key = l.group_key
    RETURNING g.group_key, g.max_running - g.running AS free
),
{{template "announce_heads"}}{{end}}
