-- Schema version 16: flows, jobs that run after other jobs
-- (docs/design/workflows.md). A job with edges is 'blocked' until each
-- parent has succeeded (or ended otherwise, by the edge's policy):
-- live, never claimed (the claim indexes hold only pending rows).
--
-- has_children marks a job some edge names as parent: the resolution
-- trigger fires only for those rows (its WHEN tests the flag, so the
-- finishes of every other job queue no trigger event). waiting_on counts
-- a blocked job's unresolved edges ('open' or 'held'). Both columns have
-- constant defaults: adding them rewrites nothing. IF NOT EXISTS: a test
-- that rolls the schema back by hand may leave them.
ALTER TABLE readpast_jobs
    ADD COLUMN IF NOT EXISTS has_children boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS waiting_on integer NOT NULL DEFAULT 0;

ALTER TABLE readpast_jobs DROP CONSTRAINT IF EXISTS readpast_jobs_state_check;
ALTER TABLE readpast_jobs ADD CONSTRAINT readpast_jobs_state_check
    CHECK (state IN ('pending', 'running', 'blocked'));
ALTER TABLE readpast_jobs DROP CONSTRAINT IF EXISTS readpast_jobs_waiting_check;
ALTER TABLE readpast_jobs ADD CONSTRAINT readpast_jobs_waiting_check
    CHECK (waiting_on >= 0 AND (state = 'blocked') = (waiting_on > 0));

-- One row per edge. state: 'open' (the parent has not ended), 'held'
-- (the parent ended without succeeding under hold_child: the child waits
-- for the parent's retry), 'done' (resolved). Rows stay for the record
-- until the child's history row is deleted.
CREATE TABLE IF NOT EXISTS readpast_edges (
    parent_id bigint NOT NULL,
    child_id  bigint NOT NULL,
    policy    text   NOT NULL CHECK (policy IN ('cancel_child', 'run_anyway', 'hold_child')),
    state     text   NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'held', 'done')),
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX IF NOT EXISTS readpast_edges_child ON readpast_edges (child_id);
-- No vacuum truncates it (schema version 7 says why).
ALTER TABLE readpast_edges SET (vacuum_truncate = false);

-- Parents whose edges are not all resolved yet: a parent with more
-- unresolved edges than its final statement resolves itself
-- (readpast_resolve_edges) leaves the rest here, with its outcome, for
-- the resolver (Store.ResolveFlows, in every rescuer's tick), which works
-- them off in bounded chunks, in seq order. A parent that has a row here
-- and finishes again (retried meanwhile) adds a row after it, so that its
-- outcomes apply in the order they happened.
CREATE TABLE IF NOT EXISTS readpast_flow_backlog (
    seq       bigserial PRIMARY KEY,
    parent_id bigint NOT NULL,
    outcome   text   NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'cancelled'))
);
CREATE INDEX IF NOT EXISTS readpast_flow_backlog_parent ON readpast_flow_backlog (parent_id);
ALTER TABLE readpast_flow_backlog SET (vacuum_truncate = false);

-- readpast_flow_budget is how many more edges this transaction may
-- resolve inline, in the final statements of parents and in the
-- cancellations they cascade into: 128 to begin with; past it, parents
-- leave their edges to the resolver (readpast_flow_backlog), so that no
-- final statement does unbounded work however wide or deep the flow.
CREATE OR REPLACE FUNCTION readpast_flow_budget() RETURNS integer
LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(nullif(current_setting('readpast.flow_budget', true), '')::integer, 128)
$$;

-- readpast_resolve_edges_of resolves up to lim of parent's unresolved
-- edges, the first in child order, as outcome says, and returns how many
-- it resolved (lim: there may be more). Set-based: the edge rows locked
-- in child order; then the rows of the children still blocked, in id
-- order, all in one statement; then the releases (a child with no
-- unresolved edge left is pending, due at its run-at or now, whichever
-- is later, with a ready mark when grouped, as an enqueue gives one) and
-- the cancellations (to history as cancelled, with an error naming the
-- parent; each child's own DELETE fires this trigger for its children in
-- turn), each counted, and the workers woken. Two parents' finishers
-- resolving edges of one child take turns on its row, each decrementing
-- once.
CREATE OR REPLACE FUNCTION readpast_resolve_edges_of(parent bigint, outcome text, lim integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
    rel bigint[];
    can bigint[];
    hol bigint[];
    released integer;
BEGIN
    SELECT count(*),
           array_agg(child_id ORDER BY child_id) FILTER (WHERE act = 'release'),
           array_agg(child_id ORDER BY child_id) FILTER (WHERE act = 'cancel'),
           array_agg(child_id ORDER BY child_id) FILTER (WHERE act = 'hold')
    INTO n, rel, can, hol
    FROM (
        SELECT e.child_id,
               CASE WHEN outcome = 'succeeded' OR e.policy = 'run_anyway' THEN 'release'
                    WHEN e.policy = 'hold_child'
                         AND EXISTS (SELECT 1 FROM readpast_jobs c WHERE c.id = e.child_id AND c.state = 'blocked')
                         THEN 'hold'
                    ELSE 'cancel' END AS act
        FROM (
            -- Open edges; held ones too once the parent has succeeded (a
            -- held edge is one of hold_child, which a failure leaves held).
            SELECT d.child_id, d.policy FROM readpast_edges d
            WHERE d.parent_id = parent AND (d.state = 'open' OR (d.state = 'held' AND outcome = 'succeeded'))
              AND readpast_stall('flow.resolve', d.child_id)
            ORDER BY d.child_id
            LIMIT lim
            FOR UPDATE
        ) e
    ) acts;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    -- The transaction's budget of edges resolved inline goes down before
    -- the cancellations below run their children's triggers, which find
    -- what is left of it (readpast_resolve_edges).
    PERFORM set_config('readpast.flow_budget', (readpast_flow_budget() - n)::text, true);
    UPDATE readpast_edges SET state = CASE WHEN child_id = ANY (hol) THEN 'held' ELSE 'done' END
    WHERE parent_id = parent AND child_id = ANY (coalesce(rel, '{}') || coalesce(can, '{}') || coalesce(hol, '{}'));
    PERFORM 1 FROM readpast_jobs
    WHERE id = ANY (coalesce(rel, '{}') || coalesce(can, '{}')) AND state = 'blocked'
    ORDER BY id
    FOR UPDATE;
    IF rel IS NOT NULL THEN
        WITH up AS (
            UPDATE readpast_jobs
            SET waiting_on = waiting_on - 1,
                state = CASE WHEN waiting_on = 1 THEN 'pending' ELSE state END,
                run_at = CASE WHEN waiting_on = 1 THEN greatest(run_at, now()) ELSE run_at END
            WHERE id = ANY (rel) AND state = 'blocked'
            RETURNING id, state, queue, priority, run_at, group_key
        ),
        freed AS (
            SELECT * FROM up WHERE state = 'pending'
        ),
        counted AS (
            INSERT INTO readpast_count_deltas (queue, state, n)
            SELECT f.queue, s.state, sum(s.n) FROM freed f CROSS JOIN (VALUES ('blocked', -1), ('pending', 1)) AS s(state, n)
            GROUP BY 1, 2
        ),
        marked AS (
            INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
            SELECT queue, priority, readpast_turn(group_key, run_at), id, group_key FROM freed WHERE group_key IS NOT NULL
        )
        SELECT count(*) INTO released FROM freed;
        IF released > 0 THEN
            -- "ahead": the released jobs may lie ahead of claim positions
            -- (postgres/claimfrom.go); every listening store makes its
            -- next claim a full one, then wakes its claimers.
            PERFORM pg_notify('readpast', 'ahead');
        END IF;
    END IF;
    IF can IS NOT NULL THEN
        WITH done AS (
            DELETE FROM readpast_jobs WHERE id = ANY (can) AND state = 'blocked' RETURNING *
        ),
        moved AS (
            INSERT INTO readpast_jobs_history
                (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
                 worker, group_key, created_at, started_at, finished_at, errors, result, unique_key, unique_until,
                 tags, snoozes)
            SELECT id, queue, kind, payload, priority, run_at, 'cancelled', attempt, max_attempts, token,
                   worker, group_key, created_at, started_at, now(),
                   errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', now(),
                       'message', format('parent job %s %s', parent,
                           CASE outcome WHEN 'cancelled' THEN 'was cancelled' ELSE outcome END))),
                   NULL, unique_key, unique_until, tags, snoozes
            FROM done
        )
        INSERT INTO readpast_count_deltas (queue, state, n)
        SELECT d.queue, s.state, sum(s.n) FROM done d CROSS JOIN (VALUES ('blocked', -1), ('cancelled', 1)) AS s(state, n)
        GROUP BY 1, 2;
    END IF;
    RETURN n;
END
$$;

-- readpast_resolve_edges runs after a parent's row leaves the live
-- table, at the end of the statement that moved it (its history row is
-- visible then; none means the row was deleted outright, resolved as a
-- cancellation). It resolves what the transaction's budget allows
-- (readpast_flow_budget) itself and leaves the rest to the resolver
-- (readpast_flow_backlog), so that a parent of thousands of children, or
-- a cancellation that cascades through thousands, finishes in bounded
-- time. When the
-- parent has a backlog already (it finished before, was retried, and
-- finished again before the resolver was done), it only queues behind it.
CREATE OR REPLACE FUNCTION readpast_resolve_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
    budget integer := readpast_flow_budget();
BEGIN
    SELECT h.state INTO outcome FROM readpast_jobs_history h WHERE h.id = OLD.id;
    outcome := coalesce(outcome, 'cancelled');
    IF budget <= 0
       OR EXISTS (SELECT 1 FROM readpast_flow_backlog WHERE parent_id = OLD.id)
       OR readpast_resolve_edges_of(OLD.id, outcome, budget) = budget THEN
        INSERT INTO readpast_flow_backlog (parent_id, outcome) VALUES (OLD.id, outcome);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS readpast_jobs_resolve_edges ON readpast_jobs;
CREATE TRIGGER readpast_jobs_resolve_edges AFTER DELETE ON readpast_jobs
    FOR EACH ROW WHEN (OLD.has_children) EXECUTE FUNCTION readpast_resolve_edges();
