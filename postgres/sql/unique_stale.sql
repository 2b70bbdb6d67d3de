-- Delete the rows of keys in $1 that no longer hold them: their holder
-- finished and their period ended. An enqueue runs this before it sends
-- again the entries whose key row it found but that did not hold the key.
-- Rows are locked in key order; it waits only for a transaction that
-- holds the same key row (an enqueue or retry taking it, a prune).
DELETE FROM readpast_unique_keys
WHERE unique_key IN (
    SELECT unique_key FROM readpast_unique_keys
    WHERE unique_key = ANY ($1::text[]) AND NOT live AND keep_until <= now()
    ORDER BY unique_key
    FOR UPDATE
);
