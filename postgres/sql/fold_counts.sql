-- Fold up to $1 count deltas into readpast_counts and delete them, in one
-- transaction, so that Stats sees each change exactly once. One folder at
-- a time: a second one that finds the try-lock taken folds nothing. The
-- counts rows are written only here, so nothing else ever waits on them.
-- Returns how many deltas were folded.
WITH gate AS (
    SELECT pg_try_advisory_xact_lock(1919181684, 1) AS ok
),
folded AS (
    DELETE FROM readpast_count_deltas d
    WHERE d.id = ANY (ARRAY(
        SELECT id FROM readpast_count_deltas
        WHERE (SELECT ok FROM gate)
        ORDER BY id
        LIMIT $1))
    RETURNING queue, state, n
),
sums AS (
    SELECT queue, state, sum(n) AS n FROM folded GROUP BY queue, state
),
applied AS (
    INSERT INTO readpast_counts (queue, state, n)
    SELECT queue, state, n FROM sums ORDER BY queue, state
    ON CONFLICT (queue, state) DO UPDATE SET n = readpast_counts.n + excluded.n
)
SELECT count(*) FROM folded;
