-- readpast schema version 2 for SQLite: attempt never goes below 0.
--
-- PostgreSQL has CHECK (attempt >= 0) on its live table. SQLite cannot add
-- a CHECK to an existing table without rebuilding it (and its
-- AUTOINCREMENT sequence), so triggers enforce the same rule. Release takes
-- one off a running job's attempt; a counter that drifted makes that write
-- fail instead of storing a negative attempt.
CREATE TRIGGER readpast_jobs_attempt_insert
BEFORE INSERT ON readpast_jobs
WHEN NEW.attempt < 0
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: readpast_jobs attempt >= 0');
END;

CREATE TRIGGER readpast_jobs_attempt_update
BEFORE UPDATE OF attempt ON readpast_jobs
WHEN NEW.attempt < 0
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: readpast_jobs attempt >= 0');
END;

-- Group slot counters no longer clamp at zero: a drift is now an error, not
-- silence. Recount them from the jobs that hold slots, so a database whose
-- counters drifted under version 1 starts exact.
UPDATE readpast_groups
SET running = (SELECT count(*) FROM readpast_jobs j
               WHERE j.state = 'running' AND j.group_key = readpast_groups.group_key);
INSERT INTO readpast_groups (group_key, running)
SELECT group_key, count(*) FROM readpast_jobs
WHERE state = 'running' AND group_key IS NOT NULL
  AND group_key NOT IN (SELECT group_key FROM readpast_groups)
GROUP BY group_key;
