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
-- Now a row trigger on readpast_groups marks them: an AFTER trigger runs
-- when its statement has done its work, while the transaction holds the
-- group row, and under READ COMMITTED each query of a PL/pgSQL function
-- takes a snapshot of its own. So the marks come from a snapshot taken
-- after the row was locked: it shows every job whose mark a claim holding
-- that row used up, since that claim committed before the lock was
-- granted. Jobs committed later carry marks of their own, which no claim
-- can use up while this transaction holds the row. A caller's REPEATABLE
-- READ or SERIALIZABLE transaction (CompleteTx) keeps one snapshot for
-- all its queries, so there the window stays open (docs/architecture.md,
-- "Concurrency groups").
--
-- It fires when an update of a group row leaves a slot free and freed
-- one (running down) or raised the limit. Claims only raise running, so
-- they never fire it. Inserted rows need none: a claim that creates a row
-- marks what it leaves itself (sql/claim.sql, announced), and a row that
-- SetGroupLimit (or free_slots' insert arm) creates belongs to a group
-- that no claim has held since its row went, so no claim has used up its
-- jobs' marks. Per queue, the first of the group's first free (at most
-- 64) due pending jobs gets a mark unless it has one: the freeing
-- statement may have marked it already (a job it made pending again).
CREATE FUNCTION readpast_announce_group() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    -- Planned once per session and kept at any table size, like the
    -- claim and completion routines (postgres/routines.go).
    SET enable_seqscan = off
    SET jit = off
    AS $$
DECLARE
    -- Due by now, not by now(): that is when this transaction began, and
    -- a job enqueued since then is due at its own transaction's start.
    due timestamptz := clock_timestamp();
BEGIN
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT h.queue, h.priority, h.run_at, h.id, NEW.group_key
    FROM (
        SELECT DISTINCT ON (j.queue) j.id, j.queue, j.priority, j.run_at
        FROM (
            SELECT id, queue, priority, run_at
            FROM readpast_jobs
            WHERE group_key = NEW.group_key AND state = 'pending' AND run_at <= due
            ORDER BY priority, run_at, id
            LIMIT least(greatest(NEW.max_running - NEW.running, 0), 64)
        ) j
        ORDER BY j.queue, j.priority, j.run_at, j.id
    ) h
    WHERE NOT EXISTS (
        SELECT 1 FROM readpast_group_ready m
        WHERE m.group_key = NEW.group_key AND m.job_id = h.id
    );
    RETURN NULL;
END $$;

CREATE TRIGGER readpast_groups_announce AFTER UPDATE ON readpast_groups
    FOR EACH ROW
    WHEN (NEW.running < NEW.max_running
          AND (NEW.running < OLD.running OR NEW.max_running > OLD.max_running))
    EXECUTE FUNCTION readpast_announce_group();
