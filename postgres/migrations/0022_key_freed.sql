-- Schema version 22: slots of keys without a concurrency bound are given
-- back without writing the key's row (docs/design/flow-control.md, "Keys
-- without a bound").
--
-- A statement that ends running jobs of such a key (max_running at its
-- "no bound" value) takes the key's row FOR KEY SHARE, which no claim's
-- lock (FOR NO KEY UPDATE SKIP LOCKED) conflicts with, and adds a row
-- here instead of lowering the row's running count: so claims never pass
-- over such a key because a completion holds its row. A key's running
-- count is its row's less the n of its rows here. They are folded into
-- the key's row (and deleted) by Tidy, by PruneGroups before it looks
-- for idle keys, and by a limit change for the keys it changes, in the
-- same transaction once it holds their rows FOR UPDATE, which waits for
-- every statement holding them FOR KEY SHARE: a key that gains a bound
-- gets it with its exact running count.
CREATE TABLE readpast_key_freed (
    id bigserial PRIMARY KEY,
    group_key text NOT NULL,
    n bigint NOT NULL CHECK (n > 0)
) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    vacuum_truncate = false
);
CREATE INDEX readpast_key_freed_key ON readpast_key_freed (group_key);
