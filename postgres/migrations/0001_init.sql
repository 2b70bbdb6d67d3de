-- Live jobs: pending and running only. Claims scan this table, so it stays
-- small however much history is kept. Finished jobs move to
-- readpast_jobs_history in the same statement that finishes them.
CREATE SEQUENCE readpast_job_id_seq;

CREATE TABLE readpast_jobs (
    id               bigint      PRIMARY KEY DEFAULT nextval('readpast_job_id_seq'),
    queue            text        NOT NULL,
    kind             text        NOT NULL,
    payload          jsonb       NOT NULL DEFAULT '{}',
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    state            text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    token            uuid,
    lease_expires_at timestamptz,
    worker           text,
    group_key        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    errors           jsonb       NOT NULL DEFAULT '[]',
    CHECK ((state = 'running') = (token IS NOT NULL AND lease_expires_at IS NOT NULL))
) WITH (
    -- Every claim and finish leaves a dead tuple here: vacuum early and
    -- leave room for HOT updates.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);
ALTER SEQUENCE readpast_job_id_seq OWNED BY readpast_jobs.id;

-- Claim order for ungrouped jobs, one queue at a time.
CREATE INDEX readpast_jobs_claim ON readpast_jobs (queue, priority, run_at, id)
    WHERE state = 'pending' AND group_key IS NULL;
-- Claim order within a concurrency group (the group's head is its first entry).
CREATE INDEX readpast_jobs_group_claim ON readpast_jobs (group_key, priority, run_at, id)
    WHERE state = 'pending' AND group_key IS NOT NULL;
-- Lease expiry sweep.
CREATE INDEX readpast_jobs_lease ON readpast_jobs (lease_expires_at) WHERE state = 'running';

-- Finished jobs. Never read by claims.
CREATE TABLE readpast_jobs_history (
    id               bigint      PRIMARY KEY,
    queue            text        NOT NULL,
    kind             text        NOT NULL,
    payload          jsonb       NOT NULL,
    priority         integer     NOT NULL,
    run_at           timestamptz NOT NULL,
    state            text        NOT NULL CHECK (state IN ('succeeded', 'failed', 'cancelled')),
    attempt          integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    token            uuid,
    worker           text,
    group_key        text,
    created_at       timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz NOT NULL,
    errors           jsonb       NOT NULL,
    result           jsonb
);
-- Retention: history rows arrive in finished_at order, so a BRIN index finds
-- old rows for almost nothing per insert (a B-tree here costs every finish).
CREATE INDEX readpast_jobs_history_finished ON readpast_jobs_history USING brin (finished_at);

-- One row per concurrency group. "Is this group free?" is decided on this
-- row, locked FOR UPDATE SKIP LOCKED and bumped in the claim statement, so
-- the decision survives the claiming transaction. Every transition out of
-- running decrements it in the same statement.
CREATE TABLE readpast_groups (
    group_key   text    PRIMARY KEY,
    running     integer NOT NULL DEFAULT 0 CHECK (running >= 0),
    max_running integer NOT NULL DEFAULT 1 CHECK (max_running >= 1)
);
