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
