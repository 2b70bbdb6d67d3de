-- readpast schema version 5 for SQLite: job counts per queue and state
-- kept by triggers, so that Stats reads a few rows however many jobs there
-- are. SQLite has one writer at a time, so the triggers update the counts
-- in the writer's own transaction: a rolled-back write counts nothing.
CREATE TABLE readpast_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

INSERT INTO readpast_counts (queue, state, n)
SELECT queue, state, count(*) FROM (
    SELECT queue, state FROM readpast_jobs
    UNION ALL
    SELECT queue, state FROM readpast_history
)
GROUP BY queue, state;

CREATE TRIGGER readpast_jobs_count_insert AFTER INSERT ON readpast_jobs BEGIN
    INSERT INTO readpast_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER readpast_jobs_count_delete AFTER DELETE ON readpast_jobs BEGIN
    UPDATE readpast_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;
CREATE TRIGGER readpast_jobs_count_update AFTER UPDATE OF queue, state ON readpast_jobs
WHEN OLD.queue IS NOT NEW.queue OR OLD.state IS NOT NEW.state BEGIN
    UPDATE readpast_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO readpast_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER readpast_history_count_insert AFTER INSERT ON readpast_history BEGIN
    INSERT INTO readpast_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER readpast_history_count_delete AFTER DELETE ON readpast_history BEGIN
    UPDATE readpast_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
END;
CREATE TRIGGER readpast_history_count_update AFTER UPDATE OF queue, state ON readpast_history
WHEN OLD.queue IS NOT NEW.queue OR OLD.state IS NOT NEW.state BEGIN
    UPDATE readpast_counts SET n = n - 1 WHERE queue = OLD.queue AND state = OLD.state;
    INSERT INTO readpast_counts (queue, state, n) VALUES (NEW.queue, NEW.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
END;
