-- readpast schema version 11 for SQLite: the retrying jobs' index, as on
-- PostgreSQL (postgres/migrations/0014_retrying.sql), for the dashboard's
-- Retries view (readpast.Inspector's Retrying): the pending jobs that
-- failed an attempt and wait to run again, those whose latest attempt
-- started last first, without reading the whole live table. It holds only
-- retrying rows: an enqueue, a claim or a finish of a job that never
-- failed writes no entry to it.
CREATE INDEX IF NOT EXISTS readpast_jobs_retrying ON readpast_jobs (started_at, id)
    WHERE state = 'pending' AND attempt > 0;
