-- The store's churning tables (live jobs, ready marks, group rows, count
-- deltas, unique keys, freed-slot counts) with
-- their dead and live row counts from the statistics collector, and
-- whether this role may vacuum them (owner, or member of the owner's
-- role), and the seconds since any process (autovacuum included) last
-- vacuumed them, NULL if none has. Read by Store.Tidy, which vacuums a
-- table once its dead rows outnumber its live ones (an eighth of them for
-- the ready marks); the figures lag by up to a second.
SELECT c.relname, s.n_dead_tup, s.n_live_tup, pg_has_role(c.relowner, 'USAGE'),
       extract(epoch FROM now() - greatest(s.last_vacuum, s.last_autovacuum))::float8
FROM pg_class c
JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid IN ('readpast_jobs'::regclass, 'readpast_group_ready'::regclass, 'readpast_groups'::regclass,
                'readpast_count_deltas'::regclass, 'readpast_unique_keys'::regclass,
                'readpast_key_freed'::regclass)
ORDER BY c.relname;
