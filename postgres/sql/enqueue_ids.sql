-- Reserve ids for a batch written with COPY (postgres/copy.go), in the
-- transaction that writes it: $1 ids from the jobs' sequence, and the
-- transaction's start on the database's clock, the now() of its inserts
-- (a job's created_at, and the run-at of one due now). nextval never
-- waits; ids that a rolled-back batch reserved are skipped, as any
-- rolled-back insert's are.
SELECT now(), array(SELECT nextval('readpast_job_id_seq') FROM generate_series(1, $1::int));
