-- Schema version 17: each edge keeps the refs its two jobs had in the
-- flow that stored it (docs/design/workflows.md, "Outputs and
-- inspection"), so that a child reads its parents' results by the names
-- its flow gave them. Empty where the job had no ref, or was named by id
-- (an earlier job), and for every edge stored before this version.
-- Constant defaults: adding the columns rewrites nothing. IF NOT EXISTS:
-- a test that rolls the schema back by hand may leave them.
ALTER TABLE readpast_edges
    ADD COLUMN IF NOT EXISTS parent_ref text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS child_ref  text NOT NULL DEFAULT '';
