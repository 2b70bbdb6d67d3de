-- Schema version 14: the retrying jobs' index, for the dashboard's Retries
-- view (readpast.Inspector's Retrying): the pending jobs that failed an
-- attempt and wait to run again, those whose latest attempt started last
-- first. Without it, listing them reads the whole live table: 130 ms with
-- a million pending jobs on a quiet machine, on every view of the page;
-- with it, 0.4 ms for 170 retrying jobs. It holds only retrying rows: an
-- enqueue, a claim or a finish of a job that never failed writes no entry
-- to it. Building it takes the live table's share lock for about 0.3 s
-- per million live jobs, and first waits for every open transaction that
-- wrote to the table (a caller's open EnqueueTx or CompleteTx); claims
-- and other writes wait behind it all along, so migrate when no long
-- transaction is open. IF NOT EXISTS: a test that rolls the
-- schema back by hand may leave it.
CREATE INDEX IF NOT EXISTS readpast_jobs_retrying ON readpast_jobs (started_at, id)
    WHERE state = 'pending' AND attempt > 0;
