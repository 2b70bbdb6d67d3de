-- readpast schema version 8 for SQLite: limits per key, as on PostgreSQL
-- (postgres/migrations/0011_limits.sql; docs/design/flow-control.md).
--
-- 1. readpast_limits holds the declared limits: one row per key, or per
--    template ("prefix*"). concurrency 0 means no bound; interval_us 0
--    means no rate (rate and per_us are kept as declared).
-- 2. A key's row in readpast_groups carries the limit that governs it
--    (limit_key: the declared key, NULL for the default of one at a time;
--    max_running 2147483647 for no bound), its rate as the microseconds
--    between two starts (interval_us, 0 for none) and burst, and the
--    bucket's theoretical arrival time (tat, Unix microseconds; NULL or
--    past: a full bucket). A missing row means running 0 and a full
--    bucket: a claim that creates it gives it the limit that governs the
--    key then.
CREATE TABLE readpast_limits (
    key         TEXT    PRIMARY KEY,
    concurrency INTEGER NOT NULL CHECK (concurrency BETWEEN 0 AND 10000),
    rate        INTEGER NOT NULL DEFAULT 0 CHECK (rate >= 0),
    per_us      INTEGER NOT NULL DEFAULT 0 CHECK (per_us >= 0),
    burst       INTEGER NOT NULL DEFAULT 1 CHECK (burst >= 1),
    interval_us INTEGER NOT NULL DEFAULT 0 CHECK (interval_us >= 0),
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

ALTER TABLE readpast_groups ADD COLUMN limit_key TEXT;
ALTER TABLE readpast_groups ADD COLUMN interval_us INTEGER NOT NULL DEFAULT 0 CHECK (interval_us >= 0);
ALTER TABLE readpast_groups ADD COLUMN burst INTEGER NOT NULL DEFAULT 1 CHECK (burst >= 1);
ALTER TABLE readpast_groups ADD COLUMN tat INTEGER;

-- Limits set before (SetGroupLimit) become declared limits of their keys.
INSERT INTO readpast_limits (key, concurrency, updated_at)
SELECT group_key, max_running, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM readpast_groups WHERE max_running <> 1;
UPDATE readpast_groups SET limit_key = group_key WHERE max_running <> 1;

CREATE INDEX readpast_groups_limit ON readpast_groups (limit_key, group_key) WHERE limit_key IS NOT NULL;

-- The templates, which every claim that creates a key's row reads
-- (resolveLimitsSQL): the keys' own limits are read by primary key.
CREATE INDEX readpast_limits_templates ON readpast_limits (key) WHERE substr(key, -1) = '*';
