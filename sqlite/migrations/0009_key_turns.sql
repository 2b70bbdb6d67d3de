-- readpast schema version 9 for SQLite: keys take turns, as on PostgreSQL
-- (postgres/migrations/0012_key_turns.sql; docs/design/flow-control.md).
--
-- A key's row keeps when a claim last took jobs of it (served_at, Unix
-- microseconds; NULL: never, or not since the row was created). A key's
-- turn in claim order is the later of its first job's run_at and
-- served_at, and the key's ready marks are put at its turn.
ALTER TABLE readpast_groups ADD COLUMN served_at INTEGER;
