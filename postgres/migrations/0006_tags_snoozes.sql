-- Schema version 6: tags and snoozes (issue 10).
--
-- 1. Tags. A job's tags are kept twice: in its row (tags, NULL for none),
--    so every statement that returns a job returns them for nothing and
--    they move with the row from live to history; and in
--    readpast_job_tags, one row per (tag, job), whose primary key is the
--    btree that a listing or a bulk action filtered by tag walks, newest
--    or oldest id first, one tag at a time. Tag rows are written once, by
--    the statement that enqueues the job (fresh job ids: the insert never
--    waits on anybody), stay while the job is live or in history (the job
--    keeps its id when it moves), and are deleted with the history row by
--    retention (prune), Delete and BulkDelete. Claims and finishers never
--    touch them, and a GIN index on the live table's tags would cost
--    every claim's update instead.
-- 2. Snoozes. snoozes counts how many times a handler put the job back
--    to pending for later (Snooze); the client bounds it.
ALTER TABLE readpast_jobs
    ADD COLUMN tags text[],
    ADD COLUMN snoozes integer NOT NULL DEFAULT 0;
ALTER TABLE readpast_jobs_history
    ADD COLUMN tags text[],
    ADD COLUMN snoozes integer NOT NULL DEFAULT 0;

CREATE TABLE readpast_job_tags (
    tag    text   NOT NULL,
    job_id bigint NOT NULL,
    PRIMARY KEY (tag, job_id)
);
