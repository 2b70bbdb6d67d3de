-- readpast schema version 14 for SQLite: each edge keeps the refs its two
-- jobs had in the flow that stored it, as on PostgreSQL
-- (postgres/migrations/0017_edge_refs.sql; docs/design/workflows.md,
-- "Outputs and inspection"). Empty where the job had no ref, or was named
-- by id, and for every edge stored before this version. Adding a column
-- with a constant default rewrites no row. SQLite has no ADD COLUMN IF
-- NOT EXISTS: the migration runs once, in the transaction that records
-- its version.
ALTER TABLE readpast_edges ADD COLUMN parent_ref TEXT NOT NULL DEFAULT '';
ALTER TABLE readpast_edges ADD COLUMN child_ref TEXT NOT NULL DEFAULT '';
