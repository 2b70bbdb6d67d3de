-- Take the row of key $1 FOR UPDATE, waiting for whoever holds it (a
-- claim, a finisher, a finisher's FOR KEY SHARE on the row of any key it
-- frees a slot of), for a limit change's transaction of one row
-- (apply_limit.sql rendered "one"), which holds nothing else yet. No row:
-- it was pruned, and the claim that creates it again gives it the limit
-- that governs it then.
SELECT group_key FROM readpast_groups WHERE group_key = $1 FOR UPDATE
