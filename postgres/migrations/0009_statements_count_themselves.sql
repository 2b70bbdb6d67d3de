-- Schema version 9: the statements that update or delete live jobs, or
-- move jobs to the history, count their own changes.
--
-- The triggers of 0005 copied every row such a statement touched into
-- transition tables (a claim: each job's old and new row) to count a few
-- (queue, state) pairs: 6-10% of a drain's throughput
-- (docs/benchmarks.md, "Counting jobs"). The statements now append their
-- net change to readpast_count_deltas themselves, in the same
-- transaction (sql/fragments/count_changes.sql): claim, complete, fail,
-- rescue, release, snooze, cancel and bulk cancel. The triggers that stay
-- count what the rest do: inserts of live jobs (enqueues, retries) and the
-- history's updates and deletes (retries, deletes, prunes).
--
-- DROP TRIGGER waits for the statements in flight on these tables and
-- holds new ones until this commits, so the counts are exact across the
-- change. Writers of an older readpast that keep running after it fire no
-- trigger here, and their claims and completions go uncounted: stop them
-- before migrating (readpast refuses to start on a schema other than its
-- own).
DROP TRIGGER readpast_jobs_count_update ON readpast_jobs;
DROP TRIGGER readpast_jobs_count_delete ON readpast_jobs;
DROP TRIGGER readpast_jobs_history_count_insert ON readpast_jobs_history;
