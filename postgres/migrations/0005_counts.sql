-- Schema version 4: job counts per queue and state that cost the same
-- however many jobs and dead rows there are.
--
-- Every statement that adds, removes or changes the state or queue of job
-- rows appends its net change per queue and state to readpast_count_deltas
-- (statement-level triggers with transition tables: one small insert per
-- statement, in the writer's own transaction, so a rolled-back enqueue
-- counts nothing). Inserts into it never wait on anything. The maintenance
-- loop folds the deltas into readpast_counts (Store.Tidy, about once a
-- second, one process at a time), deleting the deltas it folded in the
-- same transaction. Stats adds the two: what a snapshot sees is always
-- consistent.
CREATE TABLE readpast_counts (
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

CREATE TABLE readpast_count_deltas (
    id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL
) WITH (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0
);

CREATE FUNCTION readpast_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO readpast_count_deltas (queue, state, n)
        SELECT queue, state, count(*) FROM readpast_new GROUP BY queue, state;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO readpast_count_deltas (queue, state, n)
        SELECT queue, state, -count(*) FROM readpast_old GROUP BY queue, state;
    ELSE
        -- Most updates (heartbeats, claims of one state to another in
        -- the same queue...) change some counts or none: only net changes
        -- are kept.
        INSERT INTO readpast_count_deltas (queue, state, n)
        SELECT queue, state, sum(n) FROM (
            SELECT queue, state, 1 AS n FROM readpast_new
            UNION ALL
            SELECT queue, state, -1 FROM readpast_old
        ) c
        GROUP BY queue, state
        HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER readpast_jobs_count_insert AFTER INSERT ON readpast_jobs
    REFERENCING NEW TABLE AS readpast_new
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();
CREATE TRIGGER readpast_jobs_count_update AFTER UPDATE ON readpast_jobs
    REFERENCING OLD TABLE AS readpast_old NEW TABLE AS readpast_new
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();
CREATE TRIGGER readpast_jobs_count_delete AFTER DELETE ON readpast_jobs
    REFERENCING OLD TABLE AS readpast_old
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();
CREATE TRIGGER readpast_jobs_history_count_insert AFTER INSERT ON readpast_jobs_history
    REFERENCING NEW TABLE AS readpast_new
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();
CREATE TRIGGER readpast_jobs_history_count_update AFTER UPDATE ON readpast_jobs_history
    REFERENCING OLD TABLE AS readpast_old NEW TABLE AS readpast_new
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();
CREATE TRIGGER readpast_jobs_history_count_delete AFTER DELETE ON readpast_jobs_history
    REFERENCING OLD TABLE AS readpast_old
    FOR EACH STATEMENT EXECUTE FUNCTION readpast_count_changes();

-- The jobs already there. Migrations run under the migration lock, but
-- writers of older versions may still run: their statements fire the
-- triggers from the moment this commits, and what they did before is
-- counted here.
INSERT INTO readpast_counts (queue, state, n)
SELECT queue, state, count(*) FROM (
    SELECT queue, state FROM readpast_jobs
    UNION ALL
    SELECT queue, state FROM readpast_jobs_history
) j
GROUP BY queue, state;
