-- Schema version 3: unique jobs and periodic jobs (issue 9).
--
-- 1. Unique keys. A job may carry a unique key; while it holds the key,
--    enqueueing the key again creates nothing. Who holds a key is kept in
--    readpast_unique_keys, a table claims never touch: enqueue inserts a
--    key's row (INSERT ... ON CONFLICT DO NOTHING, so the primary key
--    decides, race-free, which of several enqueuers of one key creates a
--    job), the statement that finishes the job (complete, fail for good,
--    cancel, rescue for good) deletes it, or, when the key has a period
--    (keep_until), marks it no longer live and leaves it until the period
--    ends. A key is held while its row is live or its period has not
--    ended. A partial unique index on readpast_jobs would make an enqueue
--    of a key wait for a claim or a heartbeat updating the holder's row;
--    this table makes it wait only for another transaction inserting or
--    releasing the same key. See docs/architecture.md, "Unique jobs".
ALTER TABLE readpast_jobs
    ADD COLUMN unique_key text,
    ADD COLUMN unique_until timestamptz;
ALTER TABLE readpast_jobs_history
    ADD COLUMN unique_key text,
    ADD COLUMN unique_until timestamptz;

CREATE TABLE readpast_unique_keys (
    unique_key text        PRIMARY KEY,
    job_id     bigint      NOT NULL,
    -- The holder is pending or running.
    live       boolean     NOT NULL DEFAULT true,
    -- The key stays held until then, whatever the holder's outcome; NULL
    -- when it is held only while live.
    keep_until timestamptz
);

-- 2. Schedules: periodic jobs. Each row is one schedule; its next tick is
--    next_run_at, and a scheduler fires a tick with one conditional
--    UPDATE of the row (WHERE version and next_run_at are still what it
--    read), which enqueues the tick's job in the same statement. However
--    many schedulers race for a tick, one update matches: exactly one job
--    per tick, with no leader. The cron expression is read by the
--    schedulers (Go); the database only keeps the next tick.
CREATE TABLE readpast_schedules (
    name         text        PRIMARY KEY,
    cron         text        NOT NULL,
    time_zone    text        NOT NULL DEFAULT 'UTC',
    catch_up     text        NOT NULL DEFAULT 'skip' CHECK (catch_up IN ('skip', 'once')),
    paused       boolean     NOT NULL DEFAULT false,
    queue        text        NOT NULL,
    kind         text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{}',
    priority     integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL CHECK (max_attempts >= 1),
    group_key    text,
    next_run_at  timestamptz,
    last_run_at  timestamptz,
    last_job_id  bigint,
    version      bigint      NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT paused OR next_run_at IS NULL)
);
CREATE INDEX readpast_schedules_due ON readpast_schedules (next_run_at) WHERE NOT paused;

-- The latest runs of each schedule (ScheduleRunsKept): a tick and the job
-- it made. The primary key would refuse a second job for one tick.
CREATE TABLE readpast_schedule_runs (
    schedule   text        NOT NULL,
    tick       timestamptz NOT NULL,
    job_id     bigint      NOT NULL,
    catch_up   boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, tick)
);
