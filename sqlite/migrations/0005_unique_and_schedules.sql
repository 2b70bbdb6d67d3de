-- readpast schema version 4 for SQLite: unique jobs and periodic jobs, as
-- on PostgreSQL (postgres/migrations/0004_unique_and_schedules.sql).
--
-- 1. Unique keys. readpast_unique_keys holds who holds each key: enqueue
--    inserts a key's row with INSERT ... ON CONFLICT DO NOTHING (the
--    primary key decides whether an enqueue takes the key), the write
--    that finishes the holder deletes it, or, when the key has a period
--    (keep_until), marks it no longer live and leaves it until then.
ALTER TABLE readpast_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE readpast_jobs ADD COLUMN unique_until INTEGER;
ALTER TABLE readpast_history ADD COLUMN unique_key TEXT;
ALTER TABLE readpast_history ADD COLUMN unique_until INTEGER;

CREATE TABLE readpast_unique_keys (
    unique_key TEXT    PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    live       INTEGER NOT NULL DEFAULT 1,
    keep_until INTEGER
) WITHOUT ROWID;

-- 2. Schedules. A scheduler fires a tick with one conditional UPDATE of
--    the schedule's row (version and next_run_at still what it read) in
--    the write transaction that enqueues the tick's job.
CREATE TABLE readpast_schedules (
    name         TEXT    PRIMARY KEY,
    cron         TEXT    NOT NULL,
    time_zone    TEXT    NOT NULL DEFAULT 'UTC',
    catch_up     TEXT    NOT NULL DEFAULT 'skip' CHECK (catch_up IN ('skip', 'once')),
    paused       INTEGER NOT NULL DEFAULT 0,
    queue        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    group_key    TEXT,
    next_run_at  INTEGER,
    last_run_at  INTEGER,
    last_job_id  INTEGER,
    version      INTEGER NOT NULL DEFAULT 1,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    CHECK (NOT paused OR next_run_at IS NULL)
) WITHOUT ROWID;
CREATE INDEX readpast_schedules_due ON readpast_schedules (next_run_at) WHERE NOT paused;

CREATE TABLE readpast_schedule_runs (
    schedule   TEXT    NOT NULL,
    tick       INTEGER NOT NULL,
    job_id     INTEGER NOT NULL,
    catch_up   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (schedule, tick)
) WITHOUT ROWID;
