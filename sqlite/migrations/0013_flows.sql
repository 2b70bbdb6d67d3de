-- readpast schema version 13 for SQLite: flows, jobs that run after other
-- jobs (docs/design/workflows.md), as on PostgreSQL.
--
-- 1. The live table holds a third state, blocked (a job waiting for its
--    parents: never claimed), and two columns: has_children (an edge names
--    the job as its parent) and waiting_on (the job's unresolved edges;
--    more than 0 exactly when it is blocked). SQLite cannot change a
--    CHECK constraint in place, so the table is rebuilt as SQLite
--    documents (https://www.sqlite.org/lang_altertable.html, "Making
--    Other Kinds Of Table Schema Changes"): a new table, the rows copied,
--    the old one dropped, the new one renamed, then every index and
--    trigger the live table had created again. Its AUTOINCREMENT sequence
--    is carried over, so no id is ever used twice.
-- 2. readpast_edges holds the edges: open (the parent has not ended),
--    held (the parent ended without succeeding and the edge's policy
--    holds the child) or done.
-- 3. Triggers resolve a parent's edges when its row leaves the live
--    table (every final transition moves the row to history, then deletes
--    it), reading the outcome from the history row (none: the job was
--    deleted, which resolves as a cancellation). The parent's trigger
--    cancels every job below it that its end cancels, down the chains, in
--    one step (no trigger fires itself: recursive_triggers may be off).
CREATE TABLE readpast_jobs_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    priority         INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('blocked', 'pending', 'running')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    token            TEXT,
    lease_expires_at INTEGER,
    worker           TEXT,
    group_key        TEXT,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    errors           TEXT    NOT NULL DEFAULT '[]',
    unique_key       TEXT,
    unique_until     INTEGER,
    tags             TEXT,
    snoozes          INTEGER NOT NULL DEFAULT 0,
    traceparent      TEXT,
    tracestate       TEXT,
    has_children     INTEGER NOT NULL DEFAULT 0,
    waiting_on       INTEGER NOT NULL DEFAULT 0
        CHECK (waiting_on >= 0 AND (waiting_on > 0) = (state = 'blocked'))
);

INSERT INTO readpast_jobs_new (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
    lease_expires_at, worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, snoozes,
    traceparent, tracestate)
SELECT id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
    lease_expires_at, worker, group_key, created_at, started_at, errors, unique_key, unique_until, tags, snoozes,
    traceparent, tracestate
FROM readpast_jobs;

-- The sequence: readpast_jobs' own (ids of jobs now in history may be
-- above every live id), which dropping the table deletes.
DELETE FROM sqlite_sequence WHERE name = 'readpast_jobs_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'readpast_jobs_new', seq FROM sqlite_sequence WHERE name = 'readpast_jobs';

DROP TABLE readpast_jobs;
ALTER TABLE readpast_jobs_new RENAME TO readpast_jobs;

-- The indexes of versions 1, 3 and 11.
CREATE INDEX readpast_jobs_group_claim
    ON readpast_jobs (group_key, priority, run_at, id)
    WHERE state = 'pending' AND group_key IS NOT NULL;
CREATE INDEX readpast_jobs_lease
    ON readpast_jobs (lease_expires_at)
    WHERE state = 'running';
CREATE INDEX readpast_jobs_ungrouped
    ON readpast_jobs (queue, priority, run_at, id)
    WHERE state = 'pending' AND group_key IS NULL;
CREATE INDEX readpast_jobs_retrying ON readpast_jobs (started_at, id)
    WHERE state = 'pending' AND attempt > 0;

-- The attempt checks of version 2.
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

-- The counts of version 6.
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

-- The edges. The primary key serves a parent's edges (its resolution,
-- and Delete and Prune of a parent that holds a child); the index, a
-- child's.
CREATE TABLE readpast_edges (
    parent_id INTEGER NOT NULL,
    child_id  INTEGER NOT NULL,
    policy    TEXT    NOT NULL CHECK (policy IN ('cancel_child', 'run_anyway', 'hold_child')),
    state     TEXT    NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'held', 'done')),
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX readpast_edges_child ON readpast_edges (child_id);

-- A parent left the live table: resolve its unresolved edges by its
-- outcome, read from the history row the finishing write inserted just
-- before, at its finished_at.
--  - succeeded: every open or held edge is satisfied;
--  - otherwise (failed, cancelled, or no history row: deleted):
--    run_anyway edges are satisfied, hold_child edges are held, and the
--    blocked children of cancel_child edges are cancelled (to history,
--    with an error naming the parent), and so on down: the jobs below it
--    through open cancel_child edges (the recursive d below, "the
--    cancelled") are cancelled by this one trigger, their own edges
--    resolved as a cancelled parent's, each naming as its parent this
--    parent if it is one, else its cancelled parent of smallest id.
-- A satisfied edge takes one off its child's waiting_on; the child whose
-- count reaches 0 becomes pending, due at the later of its run_at and
-- the parent's finish.
--
-- The cancelled are cancelled here, not by their own deletes' triggers
-- in turn (recursive_triggers): each nested trigger keeps its statements'
-- cursors open while the next one runs, and SQLite walks every open
-- cursor to open another, so a chain cost time in the square of its
-- length (a chain of 100 took about half a second). Their has_children
-- is cleared before their delete, so that their own delete resolves
-- nothing more; readpast_jobs_child_gone still resolves the edges into
-- them. Every statement reads the cancelled afresh (a trigger has no
-- variables): through cancel_child edges still open, which the edges'
-- update leaves to the last.
CREATE TRIGGER readpast_jobs_resolve_edges AFTER DELETE ON readpast_jobs
WHEN OLD.has_children
BEGIN
    UPDATE readpast_jobs
    SET waiting_on = waiting_on - s.n,
        state = CASE WHEN waiting_on = s.n THEN 'pending' ELSE state END,
        run_at = CASE WHEN waiting_on = s.n
            THEN max(run_at, coalesce((SELECT finished_at FROM readpast_history WHERE id = OLD.id),
                                      CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)))
            ELSE run_at END
    FROM (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT child_id, count(*) AS n FROM (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND (
                (e.state IN ('open', 'held')
                 AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS 'succeeded')
                OR (e.state = 'open' AND e.policy = 'run_anyway'))
            UNION ALL
            SELECT e.child_id FROM d JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'run_anyway')
        GROUP BY child_id) AS s
    WHERE readpast_jobs.id = s.child_id AND readpast_jobs.state = 'blocked';

    INSERT INTO readpast_history (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
        lease_expires_at, worker, group_key, created_at, started_at, errors, finished_at, result,
        unique_key, unique_until, tags, snoozes)
    WITH RECURSIVE d(id) AS (
        SELECT e.child_id FROM readpast_edges e
        WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
          AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
        UNION
        SELECT e.child_id FROM d JOIN readpast_edges e
        ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
    SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, 'cancelled', j.attempt, j.max_attempts, j.token,
        NULL, j.worker, j.group_key, j.created_at, j.started_at,
        json_insert(j.errors, '$[#]', json_object(
            'attempt', j.attempt,
            'at', strftime('%Y-%m-%dT%H:%M:%S', p.at / 1000000, 'unixepoch') || printf('.%06dZ', p.at % 1000000),
            'message', CASE WHEN EXISTS (
                    SELECT 1 FROM readpast_edges x
                    WHERE x.parent_id = OLD.id AND x.child_id = j.id AND x.state = 'open' AND x.policy = 'cancel_child')
                THEN printf('parent job %d %s', OLD.id, CASE p.outcome WHEN 'failed' THEN 'failed' ELSE 'was cancelled' END)
                ELSE printf('parent job %d was cancelled', (
                    SELECT min(x.parent_id) FROM readpast_edges x
                    WHERE x.child_id = j.id AND x.state = 'open' AND x.policy = 'cancel_child'
                      AND x.parent_id IN (SELECT id FROM d)))
                END)),
        p.at, NULL, j.unique_key, j.unique_until, j.tags, j.snoozes
    FROM (SELECT coalesce(h.state, 'cancelled') AS outcome,
                 coalesce(h.finished_at, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)) AS at
          FROM (SELECT 1) LEFT JOIN readpast_history h ON h.id = OLD.id) AS p
    JOIN d
    JOIN readpast_jobs j ON j.id = d.id AND j.state = 'blocked'
    ORDER BY j.id;

    -- The edges of the cancelled but their cancel_child ones (which lead
    -- to the cancelled, and are resolved by their deletes).
    UPDATE readpast_edges
    SET state = CASE WHEN policy = 'hold_child' THEN 'held' ELSE 'done' END
    WHERE state = 'open' AND policy <> 'cancel_child' AND parent_id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    UPDATE readpast_jobs SET has_children = 0
    WHERE has_children AND state = 'blocked' AND id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    DELETE FROM readpast_jobs WHERE state = 'blocked' AND id IN (
        WITH RECURSIVE d(id) AS (
            SELECT e.child_id FROM readpast_edges e
            WHERE e.parent_id = OLD.id AND e.state = 'open' AND e.policy = 'cancel_child'
              AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded'
            UNION
            SELECT e.child_id FROM d JOIN readpast_edges e
            ON e.parent_id = d.id AND e.state = 'open' AND e.policy = 'cancel_child')
        SELECT id FROM d);

    -- The parent's own edges (its cancel_child ones are done already).
    UPDATE readpast_edges
    SET state = CASE
        WHEN (SELECT state FROM readpast_history WHERE id = OLD.id) IS 'succeeded' THEN 'done'
        WHEN policy = 'hold_child' THEN 'held'
        ELSE 'done' END
    WHERE parent_id = OLD.id AND state IN ('open', 'held')
      AND NOT (state = 'held' AND (SELECT state FROM readpast_history WHERE id = OLD.id) IS NOT 'succeeded');
END;

-- A child left the live table while blocked (cancelled): its edges are
-- resolved, as nothing; a parent that held it holds nothing any more.
CREATE TRIGGER readpast_jobs_child_gone AFTER DELETE ON readpast_jobs
WHEN OLD.waiting_on > 0
BEGIN
    UPDATE readpast_edges SET state = 'done' WHERE child_id = OLD.id AND state IN ('open', 'held');
END;

-- A child released: a grouped one gets its ready mark at its key's turn,
-- as a pending grouped job enqueued or retried does (markJobsSQL).
CREATE TRIGGER readpast_jobs_released AFTER UPDATE OF state ON readpast_jobs
WHEN OLD.state = 'blocked' AND NEW.state = 'pending' AND NEW.group_key IS NOT NULL
BEGIN
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    VALUES (NEW.queue, NEW.priority,
        max(NEW.run_at, coalesce((SELECT served_at FROM readpast_groups g WHERE g.group_key = NEW.group_key), 0)),
        NEW.id, NEW.group_key);
END;
