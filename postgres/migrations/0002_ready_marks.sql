-- Schema version 2: concurrency groups that never make anyone wait and
-- whose cost does not grow with the number of full or idle groups.
--
-- 1. Ready marks. A row of readpast_group_ready says "group G may have a
--    claimable job: job_id, at this place in claim order". Writers that do
--    not hold a group's row (enqueue, retry) only ever INSERT marks, which
--    waits on nobody. Writers that hold the group's row (a claim that locked
--    or created it, a finisher that freed a slot, SetGroupLimit) consume the
--    marks they walked and mark the group's next claimable job. A claim
--    walks marks in claim order instead of visiting every group that has
--    pending jobs, so full and idle groups cost it nothing. See
--    docs/architecture.md, "Concurrency groups", for the invariant.
CREATE TABLE readpast_group_ready (
    queue     text        NOT NULL,
    priority  integer     NOT NULL,
    run_at    timestamptz NOT NULL,
    job_id    bigint      NOT NULL,
    group_key text        NOT NULL
) WITH (
    -- Marks are inserted and deleted all the time: vacuum early.
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
CREATE INDEX readpast_group_ready_order ON readpast_group_ready (queue, priority, run_at, job_id);
-- A claim that holds a group's row drops all of that group's due marks.
CREATE INDEX readpast_group_ready_group ON readpast_group_ready (group_key);

-- Every pending grouped job gets a mark, so nothing is left unannounced.
INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT queue, priority, run_at, id, group_key
FROM readpast_jobs
WHERE state = 'pending' AND group_key IS NOT NULL;

-- 2. Group rows are no longer created by enqueue (an INSERT ... ON CONFLICT
--    of a key another open transaction inserted waits for it). Claims
--    create them, guarded by a try-lock on the key; rows of idle groups at
--    the default limit are deleted by PruneGroups. A missing row means
--    running = 0, max_running = 1.
COMMENT ON TABLE readpast_groups IS
    'One row per concurrency group that is running jobs or has a limit set; a missing row means running 0, limit 1.';

-- 3. readpast_stall marks, inside the statements, the windows where a
--    concurrent transaction can change what a statement decided on (between
--    its snapshot and its row locks). It is a no-op that the planner folds
--    away. Its second argument is a column of the row being processed, so
--    that a test's version (a function of the same name earlier on a
--    connection's search_path, which waits on an advisory lock) runs once
--    per row, at that row, instead of once before the statement starts.
CREATE FUNCTION readpast_stall(place text, at_row anyelement) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT true';
