-- The dashboard's speed test data (see docs/dashboard.md, "Speed"): 10
-- million finished jobs over the last 6 days (about 70,000 in the last
-- hour; readpast serve keeps 7 days of succeeded jobs by default) and 1 million waiting, on a migrated, empty readpast database on
-- PostgreSQL. Run with psql -v ON_ERROR_STOP=1 -f speed.sql.
--
-- History: eight queues and kinds; 2% failed (with an error), 0.5%
-- cancelled, the rest succeeded (with a result); one in ten in one of
-- 1,000 groups. Ids grow with finished_at, as they do in a real queue.
INSERT INTO readpast_jobs_history
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
     worker, group_key, created_at, started_at, finished_at, errors, result)
SELECT i,
       (ARRAY['mail', 'images', 'reports', 'billing', 'webhooks', 'exports', 'search', 'sms'])[1 + i % 8],
       (ARRAY['email', 'resize', 'render', 'invoice', 'deliver', 'export', 'index', 'text'])[1 + i % 8],
       jsonb_build_object('user', i % 100000, 'order', i, 'note', 'order ' || i || ' for customer ' || (i % 100000)),
       0, f - interval '50 milliseconds' - (i % 100) * interval '1 millisecond', st,
       CASE WHEN st = 'failed' THEN 3 ELSE 1 END, 3, NULL,
       'worker-' || (i % 16), CASE WHEN i % 10 = 0 THEN 'tenant-' || (i % 1000) END,
       f - interval '50 milliseconds' - (i % 100) * interval '1 millisecond',
       f - interval '50 milliseconds', f,
       CASE WHEN st = 'failed'
            THEN jsonb_build_array(jsonb_build_object('attempt', 3, 'at', f, 'worker', 'worker-' || (i % 16),
                                                      'message', 'upstream timed out after 30s'))
            ELSE '[]' END,
       CASE WHEN st = 'succeeded' THEN '{"ok": true}'::jsonb END
FROM (SELECT i,
             now() - interval '6 days' + interval '6 days' * (i / 10000000.0) AS f,
             CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 200 = 1 THEN 'cancelled' ELSE 'succeeded' END AS st
      FROM generate_series(1, 10000000) AS i) g;

-- Waiting: 1,000,000 pending jobs, due over the last 10 minutes except one
-- in twenty scheduled for the next day; one in ten in one of 1,000 groups.
INSERT INTO readpast_jobs
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, group_key, created_at)
SELECT 10000000 + i,
       (ARRAY['mail', 'images', 'reports', 'billing', 'webhooks', 'exports', 'search', 'sms'])[1 + i % 8],
       (ARRAY['email', 'resize', 'render', 'invoice', 'deliver', 'export', 'index', 'text'])[1 + i % 8],
       jsonb_build_object('user', i % 100000, 'order', 10000000 + i, 'note', 'waiting ' || i),
       0,
       CASE WHEN i % 20 = 0 THEN now() + interval '1 day' * (i / 1000000.0)
            ELSE now() - interval '10 minutes' + interval '10 minutes' * (i / 1000000.0) END,
       'pending', 0, 3, CASE WHEN i % 10 = 0 THEN 'tenant-' || (i % 1000) END,
       now() - interval '10 minutes' + interval '10 minutes' * (i / 1000000.0)
FROM generate_series(1, 1000000) AS i;

-- A hundred running jobs (ungrouped), leases a minute ahead.
INSERT INTO readpast_jobs
    (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts, token,
     lease_expires_at, worker, created_at, started_at)
SELECT 11000000 + i,
       (ARRAY['mail', 'images', 'reports', 'billing', 'webhooks', 'exports', 'search', 'sms'])[1 + i % 8],
       (ARRAY['email', 'resize', 'render', 'invoice', 'deliver', 'export', 'index', 'text'])[1 + i % 8],
       jsonb_build_object('order', 11000000 + i), 0, now() - interval '1 second', 'running', 1, 3,
       gen_random_uuid(), now() + interval '1 minute', 'worker-' || (i % 16),
       now() - interval '1 second', now() - interval '200 milliseconds'
FROM generate_series(1, 100) AS i;

-- The grouped jobs' ready marks, as enqueues make them.
INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
SELECT queue, priority, run_at, id, group_key
FROM readpast_jobs
WHERE state = 'pending' AND group_key IS NOT NULL;

SELECT setval('readpast_job_id_seq', 11000100);
VACUUM ANALYZE;
