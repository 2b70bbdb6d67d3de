-- readpast schema version 7 for SQLite: tags and snoozes, as on
-- PostgreSQL (postgres/migrations/0006_tags_snoozes.sql).
--
-- 1. Tags. A job's tags are kept in its row (tags: joined by spaces,
--    which no tag contains; NULL for none), so they move with it to
--    history, and in readpast_job_tags, one row per (tag, job), whose
--    primary key is the b-tree a listing or bulk action by tag walks.
--    Enqueue writes the tag rows (one statement per batch); they stay
--    while the job is live or in history and go with its history row
--    (retention, Delete, BulkDelete).
-- 2. Snoozes counts how many times a handler snoozed the job.
ALTER TABLE readpast_jobs ADD COLUMN tags TEXT;
ALTER TABLE readpast_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE readpast_history ADD COLUMN tags TEXT;
ALTER TABLE readpast_history ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0;

CREATE TABLE readpast_job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;
