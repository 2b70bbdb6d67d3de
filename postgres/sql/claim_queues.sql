-- The queues of $1 a claim may read: each one whose pause key (advisory
-- lock 1919181685, hashtext(name)) it takes in shared mode, at once or
-- never (pg_try_advisory_xact_lock_shared: a claim never waits). The keys
-- are held until the claim's transaction ends. PauseQueue
-- (sql/pause_queue.sql) takes the key exclusively before it writes
-- paused_at, so it returns only once every claim that holds the key has
-- ended, and a claim that asks for the key while a pause holds it, or
-- waits for it, leaves that queue out. Run as a statement of its own
-- before the claim's statement, whose later snapshot then reads every
-- pause that committed before the key was taken.
SELECT coalesce(array_agg(name ORDER BY ord), '{}')
FROM unnest($1::text[]) WITH ORDINALITY AS q(name, ord)
WHERE pg_try_advisory_xact_lock_shared(1919181685, hashtext(name))
