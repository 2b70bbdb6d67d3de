{{/*
free_slots gives group slots back. It expects a CTE
    freeing (group_key text, n bigint)
naming the groups whose running jobs this statement ended, and defines
freed: those groups with their free slots. The groups' next jobs are
marked by the trigger on readpast_groups (migrations/0008), at the end of
the statement and with a snapshot taken after the rows were locked: this
statement's own snapshot may predate a job whose mark a claim used up
before the lock was granted.

Lock order: the statement already holds the job rows it ended; the group
rows come after them, in key order. Every statement that waits on group
rows takes them in this order, so finishers never deadlock on each other,
and claims never wait on anything (they skip locked rows).

The group rows are reached through INSERT ... ON CONFLICT DO UPDATE, not
SELECT ... FOR UPDATE, because the row may be newer than this statement's
snapshot: a cancel that waited for a claim to commit ends a job that
claim started, in a group whose row the claim created, and a SELECT
would not see that row and would leave its slot taken for good
(TestFinisherSeesAGroupRowNewerThanItsSnapshot). ON CONFLICT finds and
locks the newest committed row whatever the snapshot. A running job's
group always has a row (PruneGroups deletes only rows with nothing
running), so the INSERT arm runs only if that ever failed to hold; it
then writes the row the decrement would have left.

A freed slot also clears the row's waiters (the first keys a claim left
unmarked because this key was full) when the key has a free slot after
it: the trigger marks them from the row's old version, which the lock
makes the newest whatever this statement's snapshot. A key still full
(running above a limit lowered meanwhile) keeps them for the completion
that frees a slot (TestAdvWaiterLostWhenOverfullKeyFrees).

Each row's count is looked up in one object of all of them, built once
for the statement (a binary search a row), not by a scan of freeing for
each row, which a statement ending jobs of 1,000 keys paid in the square
of the keys (40 of the 68 ms of a completion of 1,000 jobs).
*/}}{{define "free_slots"}}
freed AS (
    INSERT INTO readpast_groups AS g (group_key, running)
    SELECT group_key, 0 FROM freeing
    WHERE readpast_stall('finish.group_rows', n)
    ORDER BY group_key
    ON CONFLICT (group_key) DO UPDATE
    SET running = g.running - ((SELECT jsonb_object_agg(f.group_key, f.n) FROM freeing f) ->> excluded.group_key)::bigint,
        waiters = CASE WHEN g.max_running - g.running
                            + ((SELECT jsonb_object_agg(f.group_key, f.n) FROM freeing f) ->> excluded.group_key)::bigint > 0
                       THEN NULL ELSE g.waiters END
    RETURNING g.group_key, g.max_running - g.running AS free
){{end}}