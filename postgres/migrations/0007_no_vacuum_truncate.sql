-- Schema version 7: no vacuum ever truncates a readpast table.
--
-- A VACUUM that finds empty pages at the end of a table (after a drain,
-- or a backlog worked off) cuts them off, and to do so it holds an ACCESS
-- EXCLUSIVE lock on the table while it checks and truncates them: every
-- claim, completion and enqueue on that table that arrives meanwhile
-- waits (the vacuum gives the lock up once it sees waiters, checking every
-- 20 ms), and on a hot standby the replayed lock cancels queries.
-- PostgreSQL's documentation names vacuum_truncate = false as the way to
-- avoid that lock. Claims must never wait (docs/architecture.md, "Lock
-- order"), and Store.Tidy vacuums the churning tables every few seconds
-- under load, so neither its vacuums nor autovacuum's truncate any table
-- here. The empty pages stay allocated and are reused; an operator who
-- wants the space back runs VACUUM (TRUNCATE) on the table at a quiet
-- time (docs/architecture.md, "Dead rows").
ALTER TABLE readpast_jobs SET (vacuum_truncate = false);
ALTER TABLE readpast_jobs_history SET (vacuum_truncate = false);
ALTER TABLE readpast_groups SET (vacuum_truncate = false);
ALTER TABLE readpast_group_ready SET (vacuum_truncate = false);
ALTER TABLE readpast_queues SET (vacuum_truncate = false);
ALTER TABLE readpast_unique_keys SET (vacuum_truncate = false);
ALTER TABLE readpast_schedules SET (vacuum_truncate = false);
ALTER TABLE readpast_schedule_runs SET (vacuum_truncate = false);
ALTER TABLE readpast_counts SET (vacuum_truncate = false);
ALTER TABLE readpast_count_deltas SET (vacuum_truncate = false);
ALTER TABLE readpast_job_tags SET (vacuum_truncate = false);
ALTER TABLE readpast_schema SET (vacuum_truncate = false);
