-- readpast schema version 17 for SQLite: a key keeps its turn until it has
-- started its weight's worth of jobs, as on PostgreSQL
-- (postgres/migrations/0019_key_turn_rounds.sql; docs/design/flow-control.md,
-- "Keys take turns").
--
-- turn_used counts the jobs claims took of the key since its turn last
-- moved: a claim that takes n jobs of a key of weight w puts them in rounds
-- counted from turn_used, and moves served_at to the claim's time only when
-- turn_used + n reaches w, keeping (turn_used + n) mod w.
ALTER TABLE readpast_groups ADD COLUMN turn_used INTEGER NOT NULL DEFAULT 0;
