-- Schema version 8: a group with a slot freed is announced from what is
-- committed once its row is held, not from the freeing statement's
-- snapshot.
--
-- A claim that holds a full group's row uses up all of the group's due
-- ready marks and marks nothing: whoever frees a slot marks the group's
-- next jobs (migrations/0002). The statements that free slots (complete,
-- cancel, fail, rescue, release, snooze, bulk cancel, SetGroupLimit) used
-- to read those next jobs with their own snapshot, taken before they
-- locked the group row. A job that joined the group after that snapshot,
-- whose mark a claim used up before the lock, was then marked by nobody,
-- and no claim ever took it (TestLateJobOfAFullGroupIsAnnounced; CI
-- stranded one job of 22,000 that way in ConcurrentGroupsNoOverlap).
--
-- Now a trigger on readpast_groups marks them: an AFTER trigger runs
-- when its statement has done its work, while the transaction holds the
-- group rows, and under READ COMMITTED each query of a PL/pgSQL function
-- takes a snapshot of its own. So the marks come from a snapshot taken
-- after the rows were locked: it shows every job whose mark a claim
-- holding such a row used up, since that claim committed before the lock
-- was granted. Jobs committed later carry marks of their own, which no
-- claim can use up while this transaction holds the row. A caller's
-- REPEATABLE READ or SERIALIZABLE transaction (CompleteTx) keeps one
-- snapshot for all its queries, so there the window stays open
-- (docs/architecture.md, "Concurrency groups").
--
-- It runs once per statement that updates group rows, over the rows the
-- statement updated (its transition tables): set-based, as the marking
-- inside the statements was, where a row trigger cost a query per group
-- (BenchmarkCompleteFreesGroups: 8 instead of 4 ms for 100 groups). It
-- marks the groups whose free slots went up (running down, or the limit
-- raised) and are above 0. Claims only take slots, so it marks nothing
-- for them. Inserted rows need none: a claim that creates a row marks what
-- it leaves itself (sql/claim.sql, announced), and a row that
-- SetGroupLimit (or free_slots' insert arm) creates belongs to a group
-- that no claim has held since its row went, so no claim has used up its
-- jobs' marks. Per group and queue, the first of the group's first free
-- (at most 64) due pending jobs gets a mark. It may have one already (the freeing
-- statement marks a job it makes pending again, and an enqueue's mark
-- lasts until a claim holds the group): a second mark costs a claim one
-- more row to walk, and the claim that holds the group uses up both,
-- while looking for one first cost a walk of the group's dead marks.
CREATE FUNCTION readpast_announce_groups() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    -- Planned once per session and kept at any table size, like the
    -- claim and completion routines (postgres/routines.go); the settings
    -- cost once per statement.
    SET enable_seqscan = off
    SET jit = off
    AS $$
DECLARE
    -- Due by now, not by now(): that is when this transaction began, and
    -- a job enqueued since then is due at its own transaction's start.
    due timestamptz := clock_timestamp();
BEGIN
    -- Every completion sends free_slots' upsert, which fires this even
    -- when it updates nothing (an ungrouped batch): 11 instead of 30 us.
    IF NOT EXISTS (SELECT FROM new_rows) THEN
        RETURN NULL;
    END IF;
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (f.group_key, j.queue) j.queue, j.priority, j.run_at, j.id, f.group_key
    FROM (
        -- The rows this statement updated whose free slots went up, paired
        -- by key through an aggregate: as a join of the two transition
        -- tables, whose size a plan made once does not know, the planner
        -- compared every row with every other.
        SELECT group_key, max(free) FILTER (WHERE after) AS free
        FROM (SELECT group_key, max_running - running AS free, false AS after FROM old_rows
              UNION ALL
              SELECT group_key, max_running - running, true FROM new_rows) r
        GROUP BY group_key
        HAVING max(free) FILTER (WHERE after) > 0
           AND max(free) FILTER (WHERE after) > max(free) FILTER (WHERE NOT after)
    ) f
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at
        FROM readpast_jobs
        WHERE group_key = f.group_key AND state = 'pending' AND run_at <= due
        ORDER BY priority, run_at, id
        LIMIT least(f.free, 64)
    ) j
    ORDER BY f.group_key, j.queue, j.priority, j.run_at, j.id;
    RETURN NULL;
END $$;

CREATE TRIGGER readpast_groups_announce AFTER UPDATE ON readpast_groups
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION readpast_announce_groups();
