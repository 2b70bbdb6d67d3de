-- Schema version 18: a parent that leaves edges to the resolver
-- (readpast_flow_backlog, schema version 16) says so, NOTIFY readpast
-- 'backlog', when its transaction commits: every listening store wakes
-- its rescuer's resolver at once (FlowBacklogWaker) instead of at its
-- next tick, so that the children of a wide parent become claimable as
-- fast as the resolver works them off (docs/design/workflows.md, "Wide
-- flows"). Otherwise the same function as version 16's.
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
        PERFORM pg_notify('readpast', 'backlog');
    END IF;
    RETURN NULL;
END
$$;
