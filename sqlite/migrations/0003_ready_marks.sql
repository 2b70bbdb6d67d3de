-- readpast schema version 3 for SQLite: ready marks, as on PostgreSQL.
--
-- A row of readpast_group_ready says "group G may have a claimable job:
-- job_id, at this place in claim order". Enqueue and retry add one for
-- each grouped job they make pending; a claim walks the marks of its
-- queues in claim order to find the groups it may take from, drops the
-- due marks of every group it looked at and marks the group again at its
-- next claimable job while the group has a free slot; a write that frees
-- a slot marks the group's next jobs. A claim thus never reads the
-- backlog of a full group: its cost does not grow with the number of full
-- or idle groups.
CREATE TABLE readpast_group_ready (
    queue     TEXT    NOT NULL,
    priority  INTEGER NOT NULL,
    run_at    INTEGER NOT NULL,
    job_id    INTEGER NOT NULL,
    group_key TEXT    NOT NULL
);
CREATE INDEX readpast_group_ready_order ON readpast_group_ready (queue, priority, run_at, job_id);
CREATE INDEX readpast_group_ready_group ON readpast_group_ready (group_key, run_at);

INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT queue, priority, run_at, id, group_key
FROM readpast_jobs
WHERE state = 'pending' AND group_key IS NOT NULL;

-- Ungrouped jobs in claim order, one queue at a time. The claim index of
-- version 1 held grouped jobs too, which a claim had to walk past.
CREATE INDEX readpast_jobs_ungrouped
    ON readpast_jobs (queue, priority, run_at, id)
    WHERE state = 'pending' AND group_key IS NULL;
DROP INDEX readpast_jobs_claim;
