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

A key without a concurrency bound (max_running 2147483647, what a limit
of concurrency 0 resolves to) is never full, and a key with room
(running below max_running) can be claimed already, so nothing waits
for their slots: their rows are not written. shared_rows takes the
rows of every key this statement frees slots of FOR KEY SHARE, which
conflicts with no claim (claims take key rows FOR NO KEY UPDATE SKIP
LOCKED, and would otherwise pass over a key whose row a completion
holds), whatever its snapshot shows (a key full in the snapshot may have
room since, TestAdvRoomFullInTheSnapshot); roomy keeps those whose
newest committed row has room
(readpast_keys_with_room, migrations/0025: a row locked FOR KEY SHARE is
handed over as the snapshot shows it, not as a claim committed it
since, TestCompletionJudgesTheRowItLocks), and their slots are counted
in readpast_key_freed (migrations/0022) instead, to be folded into the
row by the next claim that locks it, or by Tidy. A key found full once
locked gives its slot back on the row below (held in both modes, which
do not conflict). The lock is what a limit change waits for (FOR UPDATE) before it
folds a key's counts and gives it a bound; a row that a limit change
bounded while this statement waited fails the check once locked, and
has its slots given back on the row, as does a row newer than the
snapshot, and one whose snapshot still shows the bound a limit change
has since lifted (held FOR NO KEY UPDATE, as for a key with a bound,
until this statement's transaction ends). The KEY SHARE locks come first, in key order, then the
others' (freed), in key order: finishers' KEY SHARE locks conflict with
nothing a finisher takes, and a limit change waits for one row at a
time, holding no other (postgres/limits.go), so neither order waits in
a circle.
*/}}{{define "free_slots"}}
shared_rows AS (
    SELECT g.group_key
    FROM readpast_groups g
    WHERE g.group_key = ANY (ARRAY(SELECT group_key FROM freeing))
      AND readpast_stall('finish.key_share', g.group_key)
    ORDER BY g.group_key
    FOR KEY SHARE
),
roomy AS (
    SELECT k AS group_key FROM readpast_keys_with_room(ARRAY(SELECT group_key FROM shared_rows)) k
),
freed_counts AS (
    INSERT INTO readpast_key_freed (group_key, n)
    SELECT group_key, n FROM freeing
    WHERE group_key IN (SELECT group_key FROM roomy)
),
freed AS (
    INSERT INTO readpast_groups AS g (group_key, running)
    SELECT group_key, 0 FROM freeing
    WHERE group_key NOT IN (SELECT group_key FROM roomy)
      AND readpast_stall('finish.group_rows', n)
    ORDER BY group_key
    ON CONFLICT (group_key) DO UPDATE
    SET running = g.running - ((SELECT jsonb_object_agg(f.group_key, f.n) FROM freeing f) ->> excluded.group_key)::bigint,
        waiters = CASE WHEN g.max_running - g.running
                            + ((SELECT jsonb_object_agg(f.group_key, f.n) FROM freeing f) ->> excluded.group_key)::bigint > 0
                       THEN NULL ELSE g.waiters END
    RETURNING g.group_key, g.max_running - g.running AS free
){{end}}