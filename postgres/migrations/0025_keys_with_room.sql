-- Schema version 25: a statement that ends running jobs of a key with room
-- counts the freed slots aside, as for a key without a bound (0022), and
-- claims fold a key's counts into its row as they lock it
-- (docs/design/flow-control.md, "Keys with room").
--
-- A key has room when its row's running count is below its concurrency:
-- its jobs can be claimed already, so nothing waits for the slot, and the
-- statement takes the row FOR KEY SHARE, which no claim's lock conflicts
-- with, instead of writing it. A full key's slot still goes back on its
-- row, so that the key is marked the moment it frees one.
--
-- readpast_keys_with_room returns those of keys whose newest committed
-- row has room. The caller holds the rows FOR KEY SHARE when it calls it;
-- a locker in that mode is handed the row version of its own snapshot,
-- not a newer one a claim committed meanwhile (a claim's update does not
-- conflict with the lock), so the function reads the rows anew: it is
-- VOLATILE, and its query takes a snapshot of its own. That holds in READ
-- COMMITTED only: in a caller's REPEATABLE READ or SERIALIZABLE
-- transaction it reads the transaction's snapshot, and a key a claim
-- filled since may be taken for one with room; its slot, counted aside,
-- then waits for the key's next completion or a fold, as when the
-- claim has not committed yet. Giving it back on the row instead would
-- fail the caller's transaction (40001), the row having changed since
-- its snapshot.
CREATE FUNCTION readpast_keys_with_room(keys text[])
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY
    SELECT g.group_key FROM readpast_groups g
    WHERE g.group_key = ANY (keys) AND g.running < g.max_running;
END $$;
