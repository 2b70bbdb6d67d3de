-- readpast schema version 10 for SQLite: keys' weights, as on PostgreSQL
-- (postgres/migrations/0013_key_weights.sql; docs/design/flow-control.md,
-- "Keys take turns").
--
-- 1. A limit's weight is its keys' share among the keys that take turns:
--    one claim takes up to weight jobs of a key in each of its rounds.
--    Limits declared before have weight 1, which is what they had.
-- 2. A key's row carries the weight that governs it, as it carries the
--    rest of its limit (0008_limits.sql), so that a claim reads it from
--    the row it reads the bucket from, and a limit change rewrites it
--    with the rest. A row created before has the default's weight, 1: a
--    row governed by a limit declared before has that limit's 1 too.
ALTER TABLE readpast_limits ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 100);
ALTER TABLE readpast_groups ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 1);
